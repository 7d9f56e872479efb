"""GRPO trains: every action space, the logger keys, the reference policy, the loss variants, the default budget,
CartPole solved (slow)."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from envs import TargetEnv
from grpo_helpers import params
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import GRPO


@pytest.mark.parametrize("kind", ["discrete", "multidiscrete", "multibinary", "box"])
def test_learns_on_every_action_space(kind):
    env = make_vec_env(TargetEnv, n_envs=4, seed=0, env_kwargs=dict(kind=kind))
    model = GRPO("MlpPolicy", env, n_steps=64, group_size=4, batch_size=64, learning_rate=3e-3, seed=0, device="cpu")
    before, _ = evaluate_policy(model, env, n_eval_episodes=20)
    model.learn(6000)
    after, _ = evaluate_policy(model, env, n_eval_episodes=20)
    assert after > before + 0.5, (before, after)


def test_logger_keys():
    model = GRPO("MlpPolicy", "CartPole-v1", n_steps=64, group_size=4, beta=0.04, seed=0, device="cpu")
    at_rollout_end = []

    class Record(BaseCallback):
        def _on_rollout_end(self):
            at_rollout_end.append(dict(model.logger.name_to_value))

        def _on_step(self):
            return True

    model.learn(600, callback=Record())
    values = model.logger.name_to_value
    for key in (
        "train/policy_gradient_loss",
        "train/kl_ref",
        "train/approx_kl",
        "train/clip_fraction",
        "train/entropy_loss",
        "train/group_reward_std",
        "train/zero_std_group_fraction",
    ):
        assert key in values, key
    assert values["train/kl_ref"] >= 0.0
    # a rollout's statistics are recorded as it ends, so they are dumped with that rollout (SB3's rollout/ep_rew_mean)
    for key in ("rollout/used_step_fraction", "rollout/n_groups", "rollout/n_trajectories", "rollout/outcome_reward_mean"):
        assert at_rollout_end[-1][key] == model.rollout_buffer.stats[key], key


def test_beta_zero_has_no_reference_policy_and_beta_keeps_the_initial_one():
    assert GRPO("MlpPolicy", "CartPole-v1", device="cpu").ref_policy is None
    model = GRPO("MlpPolicy", "CartPole-v1", n_steps=64, group_size=4, beta=0.1, seed=0, device="cpu")
    initial = th.cat([p.flatten() for p in model.ref_policy.parameters()]).clone()
    model.learn(500)
    th.testing.assert_close(th.cat([p.flatten() for p in model.ref_policy.parameters()]), initial)
    assert not th.equal(params(model), initial)
    synced = GRPO("MlpPolicy", "CartPole-v1", n_steps=64, group_size=4, beta=0.1, ref_update_interval=1, seed=0, device="cpu")
    synced.learn(300)
    th.testing.assert_close(th.cat([p.flatten() for p in synced.ref_policy.parameters()]), params(synced))


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo"])
@pytest.mark.parametrize("policy_loss", ["clip", "gspo"])
def test_loss_variants_train(loss_type, policy_loss):
    model = GRPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=64,
        group_size=4,
        loss_type=loss_type,
        policy_loss=policy_loss,
        group_loss_scale="sqrt",
        clip_range_high=0.28,
        seed=0,
        device="cpu",
    )
    model.learn(300)
    assert np.isfinite(model.logger.name_to_value["train/policy_gradient_loss"])


def test_default_learn_budget_is_documented_and_works_without_arguments():
    import inspect

    assert inspect.signature(GRPO.learn).parameters["total_timesteps"].default == 100_000
    assert "100,000" in GRPO.learn.__doc__


@pytest.mark.slow
def test_solves_cartpole():
    env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
    model = GRPO(
        "MlpPolicy",
        env,
        n_steps=64,
        group_size=4,
        batch_size=256,
        n_epochs=10,
        gamma=0.98,
        learning_rate=lambda p: 1e-3 * p,
        advantage_estimator="group_step_baseline",
        seed=0,
        device="cpu",
    )
    model.learn(100_000)
    mean, _ = evaluate_policy(model, gym.make("CartPole-v1"), n_eval_episodes=10)
    assert mean >= 475
