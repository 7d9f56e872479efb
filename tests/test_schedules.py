"""Schedules see a remaining progress in [0, 1], also when the last rollout overshoots the budget."""

from __future__ import annotations

import pytest
from stable_baselines3.common.env_util import make_vec_env

from sb3_grpo import GRPO, AdaptiveKLPPO, ExactTRPO

START_LR = 1e-3


def _linear(progress: float) -> float:
    return progress * START_LR


def _model(name: str):
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    if name == "grpo":
        # Whole groups of episodes: the rollout runs far past a 40-step budget.
        return GRPO("MlpPolicy", env, n_steps=8, group_size=2, batch_size=64, n_epochs=1, learning_rate=_linear, seed=0)
    if name == "adaptive_kl_ppo":
        return AdaptiveKLPPO("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=1, learning_rate=_linear, seed=0)
    return ExactTRPO("MlpPolicy", env, n_steps=32, batch_size=64, learning_rate=_linear, seed=0)


@pytest.mark.parametrize("name", ["grpo", "adaptive_kl_ppo", "exact_trpo"])
def test_overshooting_last_rollout_never_gives_a_negative_learning_rate(name: str) -> None:
    model = _model(name)
    model.learn(total_timesteps=40)
    assert model.num_timesteps > 40  # the last rollout overshot: SB3's formula gives a negative progress
    assert model._current_progress_remaining == 0.0
    # The last update ran with the schedule's final value, not with a negative learning rate (gradient ascent).
    assert model.policy.optimizer.param_groups[0]["lr"] == 0.0


def test_progress_inside_the_budget_is_sb3s() -> None:
    model = _model("grpo")
    model._update_current_progress_remaining(2_500, 10_000)
    assert model._current_progress_remaining == pytest.approx(0.75)
    model._update_current_progress_remaining(12_000, 10_000)
    assert model._current_progress_remaining == 0.0
