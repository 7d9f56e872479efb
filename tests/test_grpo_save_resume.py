"""GRPO's determinism, save and resume (from a save or a mid-rollout checkpoint, on each device) and its faults: an
interrupted save, a KeyboardInterrupt, a dead worker, a file loaded with an env whose spaces differ."""

import contextlib

import numpy as np
import pytest
import torch as th
from grpo_helpers import DEVICES, params, straight_and_reloaded
from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import SubprocVecEnv

from sb3_grpo import GRPO


def test_same_seed_same_parameters():
    runs = []
    for _ in range(2):
        model = GRPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), n_steps=64, group_size=4, seed=7, device="cpu")
        model.learn(600)
        runs.append(params(model))
    th.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)


def test_save_load_continue_is_exact(tmp_path):
    def make():
        return GRPO(
            "MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), n_steps=64, group_size=4, beta=0.05, seed=11, device="cpu"
        )

    straight, first, loaded = straight_and_reloaded(make, "CartPole-v1", 500, tmp_path)
    th.testing.assert_close(
        th.cat([p.flatten() for p in loaded.ref_policy.parameters()]),
        th.cat([p.flatten() for p in first.ref_policy.parameters()]),
    )
    assert loaded._group_counter == first._group_counter
    loaded.learn(500, reset_num_timesteps=False)
    th.testing.assert_close(params(loaded), params(straight), rtol=0, atol=0)


def test_checkpoint_taken_mid_rollout_resumes_exactly(tmp_path):
    def make(env=None):
        return GRPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), n_steps=64, group_size=4, seed=5, device="cpu")

    straight = make()
    straight.learn(1200)
    checkpointed = make()
    checkpointed.learn(1200, callback=CheckpointCallback(save_freq=300, save_path=str(tmp_path), name_prefix="ck"))
    th.testing.assert_close(params(checkpointed), params(straight), rtol=0, atol=0)
    path = sorted(tmp_path.glob("ck_*.zip"))[0]
    resumed = GRPO.load(path, env=make_vec_env("CartPole-v1", n_envs=2), device="cpu")
    resumed.learn(1200 - resumed.num_timesteps, reset_num_timesteps=False)
    th.testing.assert_close(params(resumed), params(straight), rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_predict_evaluate_save_load_on_device(device, tmp_path):
    model = GRPO("MlpPolicy", "Pendulum-v1", n_steps=64, group_size=2, seed=0, device=device)
    model.learn(400)
    action, _ = model.predict(np.zeros(3, dtype=np.float32), deterministic=True)
    assert action.shape == (1,)
    mean, _ = evaluate_policy(model, model.get_env(), n_eval_episodes=2)
    assert np.isfinite(mean)
    model.save(tmp_path / "p.zip")
    for target in DEVICES:
        loaded = GRPO.load(tmp_path / "p.zip", device=target)
        np.testing.assert_allclose(loaded.predict(np.zeros(3, dtype=np.float32), deterministic=True)[0], action, rtol=1e-5)


def test_interrupted_save_keeps_the_previous_file_and_bad_files_fail_clearly(tmp_path, monkeypatch):
    model = GRPO("MlpPolicy", "CartPole-v1", n_steps=64, group_size=2, seed=0, device="cpu")
    path = tmp_path / "model.zip"
    model.save(path)
    before = path.read_bytes()

    import stable_baselines3.common.base_class as base_class

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(base_class, "save_to_zip_file", crash)
    with pytest.raises(KeyboardInterrupt):
        model.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.zip"]  # no partial file left behind

    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(before[: len(before) // 2])
    with pytest.raises(ValueError, match="truncated"):
        GRPO.load(truncated)
    foreign = tmp_path / "foreign.zip"
    foreign.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="truncated or is not a model"):
        GRPO.load(foreign)


def test_keyboard_interrupt_mid_rollout_leaves_a_model_that_saves_and_continues(tmp_path):
    model = GRPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), n_steps=64, group_size=4, seed=0, device="cpu")

    class Interrupt(BaseCallback):
        def _on_step(self):
            if self.num_timesteps >= 300:
                raise KeyboardInterrupt
            return True

    with pytest.raises(KeyboardInterrupt):
        model.learn(1000, callback=Interrupt())
    model.save(tmp_path / "after_interrupt.zip")
    model.learn(300, reset_num_timesteps=False)
    loaded = GRPO.load(tmp_path / "after_interrupt.zip", env=make_vec_env("CartPole-v1", n_envs=2), device="cpu")
    loaded.learn(300, reset_num_timesteps=False)


def test_loading_with_an_env_whose_spaces_differ_is_refused(tmp_path):
    model = GRPO("MlpPolicy", "CartPole-v1", device="cpu")
    model.save(tmp_path / "m.zip")
    with pytest.raises(ValueError, match="spaces do not match"):
        GRPO.load(tmp_path / "m.zip", env=make_vec_env("Acrobot-v1"))


def test_dead_subproc_worker_gives_a_clear_error_not_a_hang(tmp_path):
    import os
    import signal
    import time

    env = make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=SubprocVecEnv)
    try:
        model = GRPO("MlpPolicy", env, n_steps=32, group_size=2, device="cpu")
        model.learn(100)
        os.kill(env.processes[0].pid, signal.SIGKILL)
        time.sleep(0.5)
        with pytest.raises(RuntimeError, match=r"worker process\(es\) \[0\] died"):
            model.learn(200)
        model.save(tmp_path / "still_fine.zip")
        model.set_env(make_vec_env("CartPole-v1", n_envs=2))
        model.learn(200, reset_num_timesteps=False)
    finally:
        with contextlib.suppress(BrokenPipeError):  # SB3's close() writes to the dead worker's pipe
            env.close()
