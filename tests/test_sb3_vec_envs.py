"""SB3 conformance: vectorised envs and their wrappers (SB3 ``tests/test_vec_normalize.py``'s algorithm parts,
``tests/test_dict_env.py``'s SubprocVecEnv / VecFrameStack / VecNormalize cases, ``tests/test_vec_envs.py``)."""

import gymnasium as gym
import numpy as np
import pytest
from sb3_conformance import ALL_ALGOS, DummyDictEnv, NoOptionsResetEnv, algo_kwargs, algo_params
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import SimpleMultiObsEnv
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    SubprocVecEnv,
    VecCheckNan,
    VecExtractDictObs,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
    VecTransposeImage,
)

#: worker processes by fork (SB3's default, forkserver, starts a fresh interpreter per worker: seconds per test)
FORK = dict(start_method="fork")


def make_short_pendulum() -> gym.Env:
    return gym.make("Pendulum-v1", max_episode_steps=20)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("norm_reward", [False, True])
def test_vec_normalize(model_class, norm_reward):
    """VecNormalize for training, ``get_vec_normalize_env``, ``set_env`` to an eval env and back (SB3's
    ``test_offpolicy_normalization`` for on-policy algorithms)."""
    env = VecNormalize(DummyVecEnv([make_short_pendulum]), gamma=0.99, norm_reward=norm_reward)
    eval_env = VecNormalize(DummyVecEnv([make_short_pendulum]), training=False, norm_reward=False)
    model = model_class("MlpPolicy", env, seed=0, policy_kwargs=dict(net_arch=[16]), **algo_kwargs(model_class))
    model.learn(64)
    assert model.get_vec_normalize_env() is env
    assert env.obs_rms.count > 64
    model.set_env(eval_env)
    assert model.get_vec_normalize_env() is eval_env
    model.learn(16)
    model.set_env(env)
    model.learn(64)


@algo_params(ALL_ALGOS)
def test_vec_normalize_save_load(tmp_path, model_class):
    """The model and the VecNormalize statistics save and load apart and act the same again."""
    env = VecNormalize(DummyVecEnv([make_short_pendulum]))
    model = model_class("MlpPolicy", env, seed=0, **algo_kwargs(model_class)).learn(64)
    obs = env.reset()
    action, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "model.zip")
    env.save(tmp_path / "vec_normalize.pkl")
    new_env = VecNormalize.load(tmp_path / "vec_normalize.pkl", DummyVecEnv([make_short_pendulum]))
    new_env.training = False
    loaded = model_class.load(tmp_path / "model.zip", env=new_env)
    assert np.allclose(new_env.normalize_obs(env.get_original_obs()), obs)
    assert np.allclose(loaded.predict(obs, deterministic=True)[0], action)


@algo_params(ALL_ALGOS)
def test_vec_normalize_dict_obs(model_class):
    """VecNormalize of chosen keys of a Dict observation with image, vector and Discrete parts."""
    env = VecNormalize(DummyVecEnv([DummyDictEnv]), norm_obs_keys=["vec"])
    kwargs = algo_kwargs(model_class, policy_kwargs=dict(net_arch=[16], features_extractor_kwargs=dict(cnn_output_dim=16)))
    model_class("MultiInputPolicy", env, gamma=0.5, seed=1, **kwargs).learn(64)


@algo_params(ALL_ALGOS)
def test_vec_normalize_discrete_obs(model_class):
    """VecNormalize of a Dict observation with a Discrete part left alone (only the vector normalised), Discrete
    actions."""
    env = VecNormalize(DummyVecEnv([lambda: DummyDictEnv(use_discrete_actions=True)]), norm_obs_keys=["vec"])
    kwargs = algo_kwargs(model_class, policy_kwargs=dict(net_arch=[16], features_extractor_kwargs=dict(cnn_output_dim=16)))
    model_class("MultiInputPolicy", env, seed=1, **kwargs).learn(64)


@algo_params(ALL_ALGOS)
def test_subproc_vec_env(model_class):
    """SubprocVecEnv with a Dict observation (SB3's ``test_multiprocessing``)."""
    env = make_vec_env(
        DummyDictEnv, n_envs=2, vec_env_cls=SubprocVecEnv, env_kwargs=dict(use_discrete_actions=True), vec_env_kwargs=FORK
    )
    try:
        kwargs = algo_kwargs(
            model_class,
            n_steps=32,
            batch_size=32,
            policy_kwargs=dict(net_arch=[16], features_extractor_kwargs=dict(cnn_output_dim=16)),
        )
        model = model_class("MultiInputPolicy", env, gamma=0.5, seed=1, **kwargs)
        model.learn(total_timesteps=128)
    finally:
        env.close()


@algo_params(ALL_ALGOS)
def test_subproc_vec_env_box(model_class):
    """SubprocVecEnv with a registered env and Box actions, then evaluation on it."""
    env = make_vec_env(
        "Pendulum-v1", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv, env_kwargs=dict(max_episode_steps=20), vec_env_kwargs=FORK
    )
    try:
        model = model_class("MlpPolicy", env, seed=0, **algo_kwargs(model_class, n_steps=32, batch_size=32))
        model.learn(total_timesteps=128)
        evaluate_policy(model, env, n_eval_episodes=2, warn=False)
    finally:
        env.close()


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("channel_last", [False, True])
def test_dict_vec_framestack(model_class, channel_last):
    """VecFrameStack of a Dict observation (SB3's ``test_dict_vec_framestack``). SimpleMultiObsEnv's random start
    draws from numpy's global generator, not from the reset seed (GRPO's escape)."""
    channels_order = {"vec": None, "img": "last" if channel_last else "first"}
    env = DummyVecEnv([lambda: SimpleMultiObsEnv(random_start=True, discrete_actions=True, channel_last=channel_last)])
    env = VecFrameStack(env, n_stack=3, channels_order=channels_order)
    kwargs = algo_kwargs(
        model_class,
        reproducible_reset=False,
        policy_kwargs=dict(net_arch=[8], features_extractor_kwargs=dict(cnn_output_dim=8)),
    )
    model = model_class("MultiInputPolicy", env, gamma=0.5, seed=1, **kwargs)
    model.learn(total_timesteps=64)
    evaluate_policy(model, env, n_eval_episodes=2, warn=False)


@algo_params(ALL_ALGOS)
def test_vec_framestack_box(model_class):
    """VecFrameStack of vector observations, two envs."""
    env = VecFrameStack(make_vec_env(make_short_pendulum, n_envs=2, seed=0), n_stack=4)
    model = model_class("MlpPolicy", env, seed=0, **algo_kwargs(model_class, n_steps=32, batch_size=32))
    model.learn(128)
    assert model.observation_space.shape == (12,)


@algo_params(ALL_ALGOS)
def test_vec_transpose_image(model_class):
    """An explicitly wrapped VecTransposeImage (no second wrapping) under VecFrameStack."""
    from stable_baselines3.common.envs import FakeImageEnv

    env = DummyVecEnv([lambda: FakeImageEnv(screen_height=36, screen_width=36, n_channels=1)])
    env = VecTransposeImage(VecFrameStack(env, n_stack=2))
    kwargs = algo_kwargs(
        model_class, reproducible_reset=False, policy_kwargs=dict(features_extractor_kwargs=dict(features_dim=16))
    )
    model = model_class("CnnPolicy", env, **kwargs).learn(64)
    assert model.observation_space.shape == (2, 36, 36)
    assert model.get_env() is env


@algo_params(ALL_ALGOS)
def test_vec_monitor_and_check_nan(model_class):
    """VecMonitor and VecCheckNan on top of a DummyVecEnv: episodes are reported in ``ep_info_buffer``."""
    env = VecCheckNan(
        VecMonitor(make_vec_env(make_short_pendulum, n_envs=2, seed=0, wrapper_class=None)), raise_exception=True
    )
    model = model_class("MlpPolicy", env, seed=0, **algo_kwargs(model_class, n_steps=32, batch_size=32))
    model.learn(128)
    assert len(model.ep_info_buffer) > 0
    assert all(info["l"] == 20 for info in model.ep_info_buffer)


@algo_params(ALL_ALGOS)
def test_vec_extract_dict_obs(model_class):
    """VecExtractDictObs turns a Dict observation into its vector part."""
    env = VecExtractDictObs(DummyVecEnv([DummyDictEnv]), key="vec")
    model_class("MlpPolicy", env, seed=0, **algo_kwargs(model_class)).learn(64)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("wrap", ["gym.Env", "DummyVecEnv", "VecMonitor", "VecNormalize"])
def test_env_reset_without_options(model_class, wrap):
    """An env whose ``reset`` takes no ``options`` (the old signature ``reset(self, seed=None)``): SB3's DummyVecEnv
    calls it without ``options``, so SB3's algorithms run on it."""
    if wrap == "gym.Env":
        env = NoOptionsResetEnv()
    else:
        env = DummyVecEnv([NoOptionsResetEnv])
        if wrap == "VecMonitor":
            env = VecMonitor(env)
        elif wrap == "VecNormalize":
            env = VecNormalize(env)
    model = model_class("MlpPolicy", env, seed=0, **algo_kwargs(model_class))
    model.learn(64)
