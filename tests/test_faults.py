"""Faults during a long run, for ExactTRPO and AdaptiveKLPPO (GRPO's are in ``test_grpo.py``): a KeyboardInterrupt
inside ``learn``, a save interrupted half-way, a truncated or foreign model file, a SubprocVecEnv worker that dies."""

import contextlib
import os
import signal
import time

import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

from sb3_grpo import AdaptiveKLPPO, ExactTRPO

ALGOS = {
    "exact_trpo": (ExactTRPO, dict(n_steps=32, batch_size=32, n_critic_updates=2)),
    "adaptive_kl_ppo": (AdaptiveKLPPO, dict(n_steps=32, batch_size=32, n_epochs=2)),
}


def _make(name, env=None):
    cls, kwargs = ALGOS[name]
    env = env if env is not None else make_vec_env("CartPole-v1", n_envs=2, seed=0)
    return cls("MlpPolicy", env, policy_kwargs=dict(net_arch=[16]), seed=0, device="cpu", **kwargs)


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


@pytest.mark.parametrize("name", list(ALGOS))
def test_keyboard_interrupt_mid_rollout_leaves_a_model_that_saves_and_continues(name, tmp_path):
    model = _make(name)
    with pytest.raises(KeyboardInterrupt):
        model.learn(1000, callback=Interrupt(at=150))  # in the third rollout of 64 steps
    assert model.num_timesteps == 150 and model._n_updates > 0
    model.save(tmp_path / "after_interrupt.zip")
    saved = _params(model)
    model.learn(128, reset_num_timesteps=False)
    assert model.num_timesteps >= 150 + 128

    loaded = ALGOS[name][0].load(tmp_path / "after_interrupt.zip", env=make_vec_env("CartPole-v1", n_envs=2), device="cpu")
    assert all(th.equal(a, b) for a, b in zip(saved, _params(loaded), strict=True))
    assert loaded.num_timesteps == 150
    loaded.learn(128, reset_num_timesteps=False)
    assert loaded.num_timesteps >= 150 + 128


@pytest.mark.parametrize("name", list(ALGOS))
def test_interrupted_save_keeps_the_previous_file_and_bad_files_fail_clearly(name, tmp_path, monkeypatch):
    cls = ALGOS[name][0]
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


@pytest.mark.parametrize("name", list(ALGOS))
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
