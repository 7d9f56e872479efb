"""GRPO's refusals: an env whose seeded resets differ or that never ends, non-finite observations and rewards,
bad arguments, each named before any step."""

import pytest
from envs import EndlessEnv, NaNObservationEnv, NaNRewardEnv, NoisyResetEnv, TargetEnv
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_grpo import GRPO
from sb3_grpo.grpo import NonReproducibleResetError


def test_seeded_reset_that_is_not_reproducible_is_detected():
    env = DummyVecEnv([lambda: NoisyResetEnv()] * 2)
    model = GRPO("MlpPolicy", env, n_steps=10, group_size=2, seed=0, device="cpu")
    with pytest.raises(NonReproducibleResetError, match="verify_group_starts=False"):
        model.learn(1)
    GRPO("MlpPolicy", env, n_steps=10, group_size=2, seed=0, device="cpu", verify_group_starts=False).learn(1)


def test_env_that_never_ends_is_refused_with_the_fix():
    model = GRPO("MlpPolicy", DummyVecEnv([EndlessEnv]), group_size=2, max_trajectory_length=50, device="cpu")
    with pytest.raises(RuntimeError, match="TimeLimit"):
        model.learn(1)


def test_nan_observation_names_the_slot_and_step():
    model = GRPO("MlpPolicy", DummyVecEnv([TargetEnv, NaNObservationEnv]), group_size=2, n_steps=10, device="cpu")
    with pytest.raises(ValueError, match=r"Env 1 \(its index in the VecEnv\) returned a non-finite observation .* step 2"):
        model.learn(1)


def test_nan_reward_names_the_slot_and_step():
    model = GRPO("MlpPolicy", DummyVecEnv([TargetEnv, NaNRewardEnv]), group_size=2, n_steps=10, device="cpu")
    with pytest.raises(ValueError, match=r"Env 1 \(its index in the VecEnv\) returned a non-finite reward .* step 3"):
        model.learn(1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(group_size=1), "group_size"),
        (dict(beta=-0.1), "beta"),
        (dict(loss_type="mean"), "loss_type"),
        (dict(clip_range=0.0), "clip_range"),
        (dict(importance_sampling_level="token"), "importance_sampling_level"),
        (dict(policy_loss="nope"), r"Unknown policy loss 'nope'\. Available: cispo, clip"),
        (dict(policy_loss_kwargs=dict(eps=0.1)), r"Policy loss 'clip' does not accept policy_loss_kwargs \['eps'\]"),
        (dict(kl_estimator="k9"), "kl_estimator"),
        (dict(top_entropy_quantile=-0.2), "top_entropy_quantile"),
        (dict(ref_update_interval=0), "ref_update_interval"),
        (dict(sde_sample_freq=0), "sde_sample_freq"),
        (dict(policy_kwargs=dict(squash_output=True)), "squash_output"),
        (dict(advantage_estimator="gae"), "values"),
        (dict(advantage_estimator="nope"), "group_zscore"),
        (dict(reward_functions=["nope"]), "episodic_return"),
        (dict(reward_gammas=[0.9, 0.99]), r"reward_gammas has 2 entries but reward_functions has 1"),
        (dict(reward_gammas=[1.5]), r"reward_gammas must all be in \[0, 1\]"),
        (
            dict(reward_gammas=[0.9], advantage_estimator="group_zscore"),
            r"needs an advantage estimator.*'group_step_baseline' \(with lam=1\), got 'group_zscore'",
        ),
        (
            dict(reward_gammas=[0.9], advantage_estimator="group_step_baseline", advantage_kwargs=dict(lam=0.9)),
            r"got 'group_step_baseline' with \{'lam': 0.9\}",
        ),
    ],
)
def test_bad_arguments_fail_before_any_step(kwargs, match):
    with pytest.raises((ValueError, KeyError, TypeError), match=match):
        GRPO("MlpPolicy", "CartPole-v1", device="cpu", **kwargs)
