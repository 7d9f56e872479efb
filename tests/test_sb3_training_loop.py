"""SB3 conformance: custom training loops built from the algorithm's own pieces, as SB3's tests and users write
them: ``_setup_learn``, then ``collect_rollouts`` and ``train`` (SB3 ``tests/test_train_eval_mode.py``,
``tests/test_gae.py``)."""

import numpy as np
import pytest
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env


class CountSteps(BaseCallback):
    def _on_step(self) -> bool:
        return True


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("n_envs", [1, 2])
def test_setup_learn_collect_train(model_class, n_envs):
    """``_setup_learn`` then, twice, ``collect_rollouts`` (returns True, fills the buffer, counts the steps) and
    ``train`` (moves the policy)."""
    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=0)
    model = model_class("MlpPolicy", env, seed=0, **algo_kwargs(model_class, n_steps=32, batch_size=32))
    total_timesteps, callback = model._setup_learn(total_timesteps=4 * 32 * n_envs, callback=CountSteps())
    assert total_timesteps == 4 * 32 * n_envs
    callback.on_training_start(locals(), globals())
    for _ in range(2):
        steps_before = model.num_timesteps
        assert model.collect_rollouts(model.get_env(), callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
        assert model.rollout_buffer.full
        assert model.num_timesteps - steps_before >= model.n_steps * n_envs
        assert 0 < model.rollout_buffer.size() <= model.num_timesteps  # a method, as SB3's buffers have it
        before = [p.detach().clone() for p in model.policy.parameters()]
        model.train()
        assert any(
            not np.allclose(b.cpu().numpy(), p.detach().cpu().numpy())
            for b, p in zip(before, model.policy.parameters(), strict=True)
        )
    callback.on_training_end()
    assert callback.n_calls > 0


@algo_params(ALL_ALGOS)
def test_collect_rollouts_without_training_start(model_class):
    """``collect_rollouts`` right after ``_setup_learn``, with no ``on_training_start`` (as SB3's own tests do)."""
    model = model_class("MlpPolicy", "CartPole-v1", seed=0, **algo_kwargs(model_class))
    _, callback = model._setup_learn(total_timesteps=64)
    assert model.collect_rollouts(model.get_env(), callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
    model.train()


@algo_params(ALL_ALGOS)
def test_learn_after_manual_rollouts(model_class):
    """``learn`` after a manual rollout goes on from where it was (``reset_num_timesteps=False``)."""
    model = model_class("MlpPolicy", "CartPole-v1", seed=0, **algo_kwargs(model_class))
    _, callback = model._setup_learn(total_timesteps=64)
    model.collect_rollouts(model.get_env(), callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
    model.train()
    steps = model.num_timesteps
    model.learn(64, reset_num_timesteps=False)
    assert model.num_timesteps >= steps + 64
