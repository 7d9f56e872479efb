"""Faults during a long run, for every algorithm (GRPO's interrupt, save and dead-worker cases are in
``test_grpo_save_resume.py``): a KeyboardInterrupt inside ``learn``, a save interrupted half-way, a truncated or
foreign model file, a SubprocVecEnv worker that dies (killed mid-rollout, or its env raises)."""

import contextlib
import os
import signal
import time

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from tiny_models import ALGORITHMS, CLASSES, GROUP_ALGORITHMS, make_model

# GRPO's own cases of the interrupt, save and dead-worker faults are in test_grpo_save_resume.py.
NOT_GRPO = [name for name in ALGORITHMS if name != "grpo"]


def _make(name, env=None):
    """A tiny model on two CartPole envs, rollouts of 64 steps."""
    env = env if env is not None else make_vec_env("CartPole-v1", n_envs=2, seed=0)
    return make_model(name, env, n_steps=32)


def _params(model):
    return [p.detach().clone() for p in model.policy.parameters()]


class Interrupt(BaseCallback):
    def __init__(self, at):
        super().__init__()
        self.at = at

    def _on_step(self):
        if self.num_timesteps >= self.at:
            raise KeyboardInterrupt
        return True


@pytest.mark.parametrize("name", NOT_GRPO)
def test_keyboard_interrupt_mid_rollout_leaves_a_model_that_saves_and_continues(name, tmp_path):
    model = _make(name)
    with pytest.raises(KeyboardInterrupt):
        model.learn(1000, callback=Interrupt(at=150))  # in the third rollout of 64 steps
    assert model.num_timesteps == 150 and model._n_updates > 0
    # a group algorithm saved during a rollout stores the state at that rollout's start, to redo the rollout exactly
    saved_at = model._rollout_start["num_timesteps"] if name in GROUP_ALGORITHMS else 150
    assert 0 < saved_at <= 150
    model.save(tmp_path / "after_interrupt.zip")
    saved = _params(model)
    model.learn(128, reset_num_timesteps=False)
    assert model.num_timesteps >= 150 + 128

    loaded = CLASSES[name].load(tmp_path / "after_interrupt.zip", env=make_vec_env("CartPole-v1", n_envs=2), device="cpu")
    assert all(th.equal(a, b) for a, b in zip(saved, _params(loaded), strict=True))
    assert loaded.num_timesteps == saved_at
    loaded.learn(128, reset_num_timesteps=False)
    assert loaded.num_timesteps >= saved_at + 128


@pytest.mark.parametrize("name", NOT_GRPO)
def test_interrupted_save_keeps_the_previous_file_and_bad_files_fail_clearly(name, tmp_path, monkeypatch):
    cls = CLASSES[name]
    model = _make(name)
    path = tmp_path / "model.zip"
    model.save(path)
    before = path.read_bytes()

    import stable_baselines3.common.base_class as base_class

    def crash(save_path, *args, **kwargs):
        with open(save_path, "wb") as f:  # half a file, then the interruption
            f.write(before[: len(before) // 2])
        raise KeyboardInterrupt

    model.learn(64)
    monkeypatch.setattr(base_class, "save_to_zip_file", crash)
    with pytest.raises(KeyboardInterrupt):
        model.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.zip"]  # no partial file left behind
    cls.load(path, device="cpu")

    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(before[: len(before) // 2])
    with pytest.raises(ValueError, match=f"Cannot load .*truncated.zip as a {cls.__name__} model: the file is truncated"):
        cls.load(truncated)
    foreign = tmp_path / "foreign.zip"
    foreign.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match=r"truncated or is not a model saved by model\.save"):
        cls.load(foreign)
    # an intact file loaded with a bad argument: the error is about the argument, not the file
    with pytest.raises(ValueError, match=r"learning_rate must be a number or a schedule .*given to load\(\)"):
        cls.load(path, learning_rate="3e-4 then lower")

    def sb3_asserts(self):
        raise AssertionError("an assertion of SB3's set-up")

    monkeypatch.setattr(cls, "_setup_model", sb3_asserts)  # what our checks do not catch first: not the file either
    with pytest.raises(ValueError, match=r"with the arguments given: an assertion of SB3's set-up"):
        cls.load(path)


_KILLED_SAVE = """
import sys, time
import stable_baselines3.common.base_class as base_class
from stable_baselines3.common.env_util import make_vec_env
from sb3_grpo import AdaptiveKLPPO

model = AdaptiveKLPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=1), n_steps=8, batch_size=8, device="cpu")

def stuck(save_path, *args, **kwargs):  # half a file, then the process is killed
    with open(save_path, "wb") as f:
        f.write(b"PK half a zip")
    print("writing", flush=True)
    time.sleep(60)

base_class.save_to_zip_file = stuck
model.save(sys.argv[1])
"""


def test_a_save_killed_outright_leaves_a_partial_file_that_the_next_save_removes(tmp_path):
    """SIGKILL gives no chance to clean up: the next save to the same target removes what is stale, and only that."""
    import subprocess
    import sys

    from sb3_grpo.common.save_util import STALE_PARTIAL_AGE, partial_name

    path = tmp_path / "model.zip"
    model = _make("adaptive_kl_ppo")
    model.save(path)
    before = path.read_bytes()

    writer = subprocess.Popen([sys.executable, "-c", _KILLED_SAVE, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
    finally:
        writer.kill()
        writer.wait()
    killed = tmp_path / partial_name("model.zip", writer.pid)
    assert killed.exists() and path.read_bytes() == before  # the previous file is intact, the partial one left over

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a writer still at work
    try:
        fresh = tmp_path / partial_name("model.zip", live.pid)
        fresh.write_bytes(b"being written")
        other_host = tmp_path / ".model.zip.partial-otherhost-12345.zip"  # its writer's liveness is unknown here
        other_host.write_bytes(b"being written elsewhere")
        ancient = tmp_path / ".model.zip.partial-otherhost-23456.zip"
        ancient.write_bytes(b"left a long time ago")
        old = time.time() - STALE_PARTIAL_AGE - 60
        os.utime(ancient, (old, old))
        other_target = tmp_path / partial_name("other.zip", writer.pid)  # another target's: not this save's business
        other_target.write_bytes(b"x")

        model.save(path)
        assert not killed.exists() and not ancient.exists()
        assert fresh.exists() and other_host.exists() and other_target.exists()
        CLASSES["adaptive_kl_ppo"].load(path, device="cpu")
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize("name", NOT_GRPO)
def test_dead_subproc_worker_gives_a_clear_error_not_a_hang(name, tmp_path):
    env = make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=SubprocVecEnv)
    try:
        model = _make(name, env)
        model.learn(64)
        os.kill(env.processes[1].pid, signal.SIGKILL)
        time.sleep(0.5)
        with pytest.raises(RuntimeError, match=r"worker process\(es\) \[1\] died.*model.set_env\(new_env\)"):
            model.learn(128, reset_num_timesteps=False)
        model.save(tmp_path / "still_fine.zip")
        model.set_env(make_vec_env("CartPole-v1", n_envs=2))
        model.learn(64, reset_num_timesteps=False)
    finally:
        with contextlib.suppress(BrokenPipeError):  # SB3's close() writes to the dead worker's pipe
            env.close()


class KillWorker(BaseCallback):
    """Kills worker 1 with SIGKILL at the given step, and lets training go on at once (no time for it to exit)."""

    def __init__(self, env, at):
        super().__init__()
        self.env, self.at = env, at

    def _on_step(self):
        if self.num_timesteps == self.at:
            os.kill(self.env.processes[1].pid, signal.SIGKILL)
        return True


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_worker_killed_mid_rollout_is_named_every_time(name, tmp_path):
    """Right after the broken pipe the killed worker may not have exited yet: the message must not depend on it."""
    from envs import TargetEnv

    from sb3_grpo.common.worker_faults import WorkerDiedError

    env = SubprocVecEnv([TargetEnv, TargetEnv])
    try:
        model = _make(name, env)
        match = r"worker process\(es\) \[1\] died \(worker 1 was killed by SIGKILL\).*set_env"
        with pytest.raises(WorkerDiedError, match=match):
            model.learn(500, callback=KillWorker(env, at=20))
        assert env.closed  # closed for the user: env.close() neither hangs on the dead pipe nor raises
        env.close()
        model.save(tmp_path / "still_fine.zip")
        model.set_env(DummyVecEnv([TargetEnv, TargetEnv]))
        model.learn(64, reset_num_timesteps=False)
    finally:
        env.close()


@pytest.mark.parametrize("name", ALGORITHMS)
def test_an_env_that_raises_in_a_worker_is_named_with_its_exception(name):
    from envs import RaisesInStepEnv, TargetEnv

    from sb3_grpo.common.worker_faults import WorkerDiedError

    env = SubprocVecEnv([TargetEnv, RaisesInStepEnv])
    try:
        model = _make(name, env)
        match = r"worker process\(es\) \[1\] died \(worker 1 raised ValueError: the env broke at step 4\)"
        with pytest.raises(WorkerDiedError, match=match) as info:
            model.learn(500)
        message = str(info.value)
        assert "Worker 1's traceback" in message and 'raise ValueError("the env broke at step 4")' in message
        assert isinstance(info.value.__cause__, (EOFError, ConnectionError))
        assert model.num_timesteps <= 2 * 4
    finally:
        env.close()


def test_the_fault_report_leaves_the_env_alone_otherwise():
    """The reporting subclass changes nothing else: the same steps, the same class name seen through isinstance."""
    from envs import TargetEnv
    from stable_baselines3.common.monitor import Monitor

    from sb3_grpo.common.worker_faults import fault_report_class, install_fault_reports

    env = SubprocVecEnv([lambda: Monitor(TargetEnv())] * 2)
    try:
        install_fault_reports(env)
        install_fault_reports(env)  # idempotent
        classes = env.get_attr("__class__")
        assert all(issubclass(c, Monitor) and c is fault_report_class(Monitor) for c in classes)
        assert env.env_is_wrapped(Monitor) == [True, True]
        env.seed(3)
        first = env.reset()
        reference = DummyVecEnv([lambda: Monitor(TargetEnv())] * 2)
        reference.seed(3)
        np.testing.assert_array_equal(first, reference.reset())
        for _ in range(7):
            actions = np.array([1, 2])
            for got, want in zip(env.step(actions), reference.step(actions), strict=False):
                if isinstance(got, np.ndarray):
                    np.testing.assert_array_equal(got, want)
    finally:
        env.close()

    class Local(TargetEnv):  # a worker could not import it by name: left alone
        pass

    assert fault_report_class(Local) is None
