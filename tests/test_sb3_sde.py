"""SB3 conformance: generalised state-dependent exploration, gSDE (SB3 ``tests/test_sde.py``, contrib
``tests/test_run.py::test_trpo_params``)."""

import gymnasium as gym
import numpy as np
import pytest
from sb3_conformance import ALL_ALGOS, StoreActionEnvWrapper, algo_kwargs, algo_params, has_critic
from stable_baselines3 import PPO

from sb3_grpo import GRPO, REINFORCE, AdaptiveKLPPO, ExactTRPO


@algo_params(ALL_ALGOS)
def test_sde_check(model_class):
    """gSDE with discrete actions is a ValueError."""
    with pytest.raises(ValueError):
        model_class("MlpPolicy", "CartPole-v1", use_sde=True, **algo_kwargs(model_class))


@algo_params([PPO, AdaptiveKLPPO, ExactTRPO])
def test_only_sde_squashed(model_class):
    """``squash_output=True`` needs gSDE (SB3 asserts; AdaptiveKLPPO may raise ValueError, an accepted deviation)."""
    with pytest.raises((AssertionError, ValueError), match=r"use_sde=True"):
        model_class(
            "MlpPolicy", "Pendulum-v1", use_sde=False, policy_kwargs=dict(squash_output=True), **algo_kwargs(model_class)
        )


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("use_expln", [False, True])
@pytest.mark.parametrize("squash_output", [False, True])
def test_state_dependent_noise(model_class, use_expln, squash_output):
    """gSDE with ``use_expln`` and ``squash_output``: stored actions inside the bounds; squashed actions unscaled to
    the env's range (Pendulum: [-2, 2])."""
    env = StoreActionEnvWrapper(gym.make("Pendulum-v1"))
    policy_kwargs = dict(log_std_init=-2, use_expln=use_expln, net_arch=[64], squash_output=squash_output)
    model = model_class(
        "MlpPolicy", env, use_sde=True, seed=1, verbose=1, policy_kwargs=policy_kwargs, **algo_kwargs(model_class)
    )
    model.learn(total_timesteps=255)
    actions = np.asarray(model.rollout_buffer.actions)
    assert (actions <= model.action_space.high).all()
    assert (actions >= model.action_space.low).all()
    if squash_output:
        if actions.max() > 0.5:
            assert np.max(env.actions) > 1.0
        if actions.min() < -0.5:
            assert np.min(env.actions) < -1.0
    model.policy.reset_noise()


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("sde_sample_freq", [-1, 4])
def test_sde_sample_freq(model_class, sde_sample_freq):
    """gSDE with new noise every ``sde_sample_freq`` steps, two envs, learn, predict and save/load."""
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    kwargs = algo_kwargs(model_class, n_steps=32, batch_size=32)
    model = model_class("MlpPolicy", env, use_sde=True, sde_sample_freq=sde_sample_freq, seed=0, **kwargs)
    model.learn(128)
    obs = env.reset()
    action, _ = model.predict(obs, deterministic=False)
    assert action.shape == (2, 1)


@algo_params([GRPO, ExactTRPO, AdaptiveKLPPO, REINFORCE])
def test_sde_and_pi_vf_net_arch(model_class):
    """contrib's ``test_trpo_params``: gSDE, minibatches and a pi/vf net_arch."""
    kwargs = algo_kwargs(model_class, n_steps=64, batch_size=32)
    net_arch = dict(pi=[32], vf=[32]) if has_critic(model_class) else dict(pi=[32])
    model_class("MlpPolicy", "Pendulum-v1", use_sde=True, seed=0, policy_kwargs=dict(net_arch=net_arch), **kwargs).learn(256)
