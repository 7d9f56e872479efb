"""SB3 conformance: ``predict`` (SB3 ``tests/test_predict.py``)."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params
from stable_baselines3.common.envs import IdentityEnv, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from stable_baselines3.common.utils import get_device
from stable_baselines3.common.vec_env import DummyVecEnv


class SubClassedBox(spaces.Box):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)


class CustomSubClassedSpaceEnv(gym.Env):
    """SB3's env with subclassed Box spaces, an old-style ``reset(self, seed=None)`` and random episode ends."""

    def __init__(self):
        super().__init__()
        self.observation_space = SubClassedBox(-1, 1, shape=(2,), dtype=np.float32)
        self.action_space = SubClassedBox(-1, 1, shape=(2,), dtype=np.float32)

    def reset(self, seed=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, np.random.rand() > 0.5, False, {}


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
@pytest.mark.parametrize(
    "device",
    ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not th.cuda.is_available(), reason="CUDA not available")), "auto"],
)
def test_predict(model_class, env_id, device):
    """predict works on a single observation and on a batch, on every device, with the right shapes."""
    model = model_class("MlpPolicy", env_id, device=device, **algo_kwargs(model_class))
    assert get_device(device).type == model.policy.device.type

    env = gym.make(env_id)
    vec_env = DummyVecEnv([lambda: gym.make(env_id), lambda: gym.make(env_id)])

    obs, _ = env.reset()
    action, _ = model.predict(obs)
    assert isinstance(action, np.ndarray)
    assert action.shape == env.action_space.shape
    assert env.action_space.contains(action)

    vec_env_obs = vec_env.reset()
    action, _ = model.predict(vec_env_obs)
    assert isinstance(action, np.ndarray)
    assert action.shape[0] == vec_env_obs.shape[0]


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env", [IdentityEnv(4), IdentityEnvMultiDiscrete(4), IdentityEnvMultiBinary(4)], ids=type)
def test_predict_discrete_obs_and_actions(model_class, env):
    """A single Discrete / MultiDiscrete / MultiBinary observation gives one action of the action space's shape."""
    model = model_class("MlpPolicy", env, **algo_kwargs(model_class))
    obs, _ = env.reset()
    for deterministic in (False, True):
        action, _ = model.predict(obs, deterministic=deterministic)
        assert np.shape(action) == np.shape(obs)
        assert env.action_space.contains(action)
    batch = np.stack([obs, obs])
    action, _ = model.predict(batch, deterministic=True)
    assert np.shape(action) == (2, *np.shape(obs))


@algo_params(ALL_ALGOS)
def test_predict_deterministic_is_repeatable(model_class):
    model = model_class("MlpPolicy", "Pendulum-v1", seed=0, **algo_kwargs(model_class))
    obs, _ = gym.make("Pendulum-v1").reset(seed=0)
    first, _ = model.predict(obs, deterministic=True)
    for _ in range(3):
        assert np.allclose(model.predict(obs, deterministic=True)[0], first)


@algo_params(ALL_ALGOS)
def test_subclassed_space_env(model_class):
    """Subclassed spaces, a ``reset`` without ``options`` (SB3's DummyVecEnv calls it without) and episodes of random
    length; the env does not seed its resets (GRPO's escape)."""
    env = CustomSubClassedSpaceEnv()
    model = model_class(
        "MlpPolicy", env, policy_kwargs=dict(net_arch=[32]), **algo_kwargs(model_class, reproducible_reset=False)
    )
    model.learn(300)
    obs, _ = env.reset()
    env.step(model.predict(obs))


@algo_params(ALL_ALGOS)
def test_mixing_gym_vecenv_api(model_class):
    """``predict(env.reset())`` with the (obs, info) tuple says what went wrong."""
    env = gym.make("CartPole-v1")
    model = model_class("MlpPolicy", env, **algo_kwargs(model_class))
    wrong_obs = env.reset()
    with pytest.raises(ValueError, match=r"mixing Gym API"):
        model.predict(wrong_obs)
