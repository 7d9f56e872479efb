"""SB3 conformance: observation and action spaces, Dict observations (SB3 ``tests/test_spaces.py``,
``tests/test_dict_env.py``, contrib ``tests/test_dict_env.py``)."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from sb3_conformance import ALL_ALGOS, DummyDictEnv, SeededDummyEnv, algo_kwargs, algo_params
from stable_baselines3 import PPO
from stable_baselines3.common.envs import BitFlippingEnv
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv

BOX_FLOAT32 = spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32)
BOX_FLOAT64 = spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float64)

#: gymnasium 1.3 registers Taxi-v4 in place of Taxi-v3 (1.0 to 1.2): the one this gymnasium has.
TAXI = "Taxi-v4" if "Taxi-v4" in gym.registry else "Taxi-v3"

OBSERVATION_SPACES = {
    "Box32": BOX_FLOAT32,
    "Box64": BOX_FLOAT64,
    "Box2d": spaces.Box(low=-1, high=1, shape=(2, 3), dtype=np.float32),
    "Discrete": spaces.Discrete(4),
    "MultiDiscrete": spaces.MultiDiscrete([4, 3]),
    "MultiBinary": spaces.MultiBinary(8),
    "MultiBinary2d": spaces.MultiBinary((3, 2)),
    "DictBox": spaces.Dict({"a": BOX_FLOAT32, "b": BOX_FLOAT64}),
    "DictDiscrete": spaces.Dict({"a": BOX_FLOAT32, "b": spaces.Discrete(3), "c": spaces.MultiDiscrete([2, 3])}),
}

ACTION_SPACES = {
    "Box32": BOX_FLOAT32,
    "Box64": BOX_FLOAT64,
    "Box2d": spaces.Box(low=-1, high=1, shape=(2, 2), dtype=np.float32),
    "Discrete": spaces.Discrete(3),
    "MultiDiscrete": spaces.MultiDiscrete([3, 2]),
    "MultiBinary": spaces.MultiBinary(3),
}


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("obs_name", list(OBSERVATION_SPACES))
def test_observation_spaces(model_class, obs_name):
    """Every observation space SB3's on-policy algorithms take (Box actions): learn, then predict a valid action."""
    env = SeededDummyEnv(OBSERVATION_SPACES[obs_name], BOX_FLOAT32)
    policy = "MultiInputPolicy" if isinstance(env.observation_space, spaces.Dict) else "MlpPolicy"
    model = model_class(policy, env, seed=0, policy_kwargs=dict(net_arch=[12]), **algo_kwargs(model_class))
    model.learn(64)
    obs, _ = env.reset(seed=1)
    action, _ = model.predict(obs, deterministic=False)
    assert env.action_space.contains(action)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("action_name", list(ACTION_SPACES))
def test_action_spaces(model_class, action_name):
    """Every action space: learn, then predict an action of the space's dtype and shape."""
    env = SeededDummyEnv(BOX_FLOAT32, ACTION_SPACES[action_name])
    model = model_class("MlpPolicy", env, seed=0, policy_kwargs=dict(net_arch=[12]), **algo_kwargs(model_class))
    model.learn(64)
    obs, _ = env.reset(seed=1)
    action, _ = model.predict(obs, deterministic=False)
    assert action.shape == env.action_space.shape
    assert env.action_space.contains(action)
    if isinstance(env.action_space, spaces.Box):
        assert action.dtype == env.action_space.dtype


@algo_params(ALL_ALGOS)
def test_multidim_binary_not_supported(model_class):
    env = SeededDummyEnv(BOX_FLOAT32, spaces.MultiBinary([2, 3]))
    with pytest.raises(AssertionError, match=r"Multi-dimensional MultiBinary\(.*\) action space is not supported"):
        model_class("MlpPolicy", env, **algo_kwargs(model_class))


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env_id", [TAXI, "FrozenLake-v1"])
def test_discrete_obs_space(model_class, env_id):
    """Gymnasium's envs with a Discrete observation space."""
    env = gym.make(env_id)
    model_class("MlpPolicy", env, policy_kwargs=dict(net_arch=[16]), **algo_kwargs(model_class)).learn(64)


# ------------------------------------------------------------------ Dict observations


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("use_discrete_actions", [False, True])
@pytest.mark.parametrize("channel_last", [False, True])
def test_dict_spaces(model_class, use_discrete_actions, channel_last):
    """A Dict observation with image, vector and Discrete parts (SB3's and contrib's ``test_dict_spaces``)."""
    env = DummyDictEnv(use_discrete_actions=use_discrete_actions, channel_last=channel_last)
    kwargs = algo_kwargs(model_class, policy_kwargs=dict(net_arch=[16], features_extractor_kwargs=dict(cnn_output_dim=16)))
    model = model_class("MultiInputPolicy", env, gamma=0.5, seed=1, **kwargs)
    model.learn(total_timesteps=64)
    evaluate_policy(model, env, n_eval_episodes=2, warn=False)


@algo_params(ALL_ALGOS)
def test_consistency(model_class):
    """A Dict observation with one vector part and the flattened observation give the same network and, with the
    same seed, the same actions before and after learning (SB3's and contrib's ``test_consistency``)."""
    dict_env = gym.wrappers.TimeLimit(DummyDictEnv(vec_only=True), 100)
    env = gym.wrappers.FlattenObservation(dict_env)
    obs, _ = dict_env.reset(seed=10)
    kwargs = algo_kwargs(model_class, policy_kwargs=dict(net_arch=[8, 8]))

    dict_model = model_class("MultiInputPolicy", dict_env, gamma=0.5, seed=1, **kwargs)
    action_before_learning_1, _ = dict_model.predict(obs, deterministic=True)
    dict_model.learn(total_timesteps=128)

    normal_model = model_class("MlpPolicy", env, gamma=0.5, seed=1, **kwargs)
    action_before_learning_2, _ = normal_model.predict(obs["vec"], deterministic=True)
    normal_model.learn(total_timesteps=128)

    action_1, _ = dict_model.predict(obs, deterministic=True)
    action_2, _ = normal_model.predict(obs["vec"], deterministic=True)
    assert np.allclose(action_before_learning_1, action_before_learning_2)
    assert np.allclose(action_1, action_2)


@algo_params(ALL_ALGOS)
def test_goal_env(model_class):
    """BitFlippingEnv (a goal-conditioned Dict observation) with MultiInputPolicy."""
    env = BitFlippingEnv(n_bits=4)
    model = model_class("MultiInputPolicy", env, **algo_kwargs(model_class)).learn(128)
    evaluate_policy(model, model.get_env(), n_eval_episodes=2, warn=False)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("policy", ["MlpPolicy", "CnnPolicy"])
def test_policy_hint(model_class, policy):
    """The wrong policy for a Dict observation space is a ValueError (SB3 points to MultiInputPolicy)."""
    with pytest.raises(ValueError):
        model_class(policy, BitFlippingEnv(n_bits=4), **algo_kwargs(model_class))


@algo_params(ALL_ALGOS)
def test_dict_nested(model_class):
    """Nested Dict observation spaces are refused with NotImplementedError, as SB3 does."""
    with pytest.raises(NotImplementedError):
        model_class("MultiInputPolicy", DummyDictEnv(nested_dict_obs=True), seed=1, **algo_kwargs(model_class))
    with pytest.raises(NotImplementedError):
        DummyVecEnv([lambda: DummyDictEnv(nested_dict_obs=True)])


def test_reference_dict_env_is_valid():
    """The Dict env of this file passes SB3's env checker and PPO learns on it."""
    from stable_baselines3.common.env_checker import check_env

    check_env(DummyDictEnv())
    check_env(SeededDummyEnv(OBSERVATION_SPACES["DictDiscrete"], ACTION_SPACES["MultiDiscrete"]))
    PPO("MultiInputPolicy", DummyDictEnv(), n_steps=64, n_epochs=1).learn(64)
