"""SB3 conformance: image observations and CnnPolicy (SB3 ``tests/test_cnn.py``, contrib ``tests/test_cnn.py``)."""

import numpy as np
import pytest
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params, has_critic
from stable_baselines3.common.envs import FakeImageEnv
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecNormalize, VecTransposeImage, is_vecenv_wrapped


def cnn_kwargs(model_class, **policy_kwargs):
    policy_kwargs.setdefault("features_extractor_kwargs", dict(features_dim=16))
    policy_kwargs.setdefault("net_arch", [16])
    return algo_kwargs(model_class, reproducible_reset=False, policy_kwargs=policy_kwargs)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("share_features_extractor", [True, False])
@pytest.mark.parametrize("discrete", [True, False])
def test_cnn(tmp_path, model_class, share_features_extractor, discrete):
    """CnnPolicy on channel-last images (wrapped in VecTransposeImage), with a shared or separate features extractor;
    stochastic predict on a channel-last observation; the same deterministic action after save/load."""
    env = FakeImageEnv(screen_height=40, screen_width=40, n_channels=1, discrete=discrete)
    kwargs = cnn_kwargs(model_class, share_features_extractor=share_features_extractor)
    model = model_class("CnnPolicy", env, **kwargs).learn(64)
    assert is_vecenv_wrapped(model.get_env(), VecTransposeImage)
    if has_critic(model_class):  # GRPO's and OnlineDPO's policy has one network: the option has nothing to share
        policy = model.policy
        shared = policy.pi_features_extractor is policy.vf_features_extractor
        assert shared == share_features_extractor

    obs, _ = env.reset()
    for _ in range(10):
        model.predict(obs, deterministic=False)
    action, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "cnn_model.zip")
    model = model_class.load(tmp_path / "cnn_model.zip")
    assert np.allclose(action, model.predict(obs, deterministic=True)[0])


@algo_params(ALL_ALGOS)
def test_channel_first_env(tmp_path, model_class):
    """Channel-first images are used as they are (no VecTransposeImage)."""
    env = FakeImageEnv(screen_height=40, screen_width=40, n_channels=1, discrete=True, channel_first=True)
    model = model_class("CnnPolicy", env, **cnn_kwargs(model_class)).learn(64)
    assert not is_vecenv_wrapped(model.get_env(), VecTransposeImage)
    obs, _ = env.reset()
    action, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "cnn_model.zip")
    model = model_class.load(tmp_path / "cnn_model.zip")
    assert np.allclose(action, model.predict(obs, deterministic=True)[0])


@algo_params(ALL_ALGOS)
def test_vec_transpose_skip(model_class):
    """VecFrameStack of channel-first frames, with ``VecTransposeImage(skip=True)`` (SB3 stacks 5 frames of 10
    channels; 5 of 2 here, for speed)."""
    env = FakeImageEnv(screen_height=41, screen_width=40, n_channels=2, discrete=True, channel_first=True)
    env = VecFrameStack(DummyVecEnv([lambda: env]), 5, channels_order="first")
    obs_shape_before = env.reset().shape
    env = VecTransposeImage(env, skip=True)
    assert np.allclose(obs_shape_before, env.reset().shape)
    model = model_class("CnnPolicy", env, seed=1, **cnn_kwargs(model_class)).learn(64)
    model.predict(env.reset(), deterministic=True)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("normalize_images", [True, False])
def test_image_like_input(model_class, normalize_images):
    """Image-like float input (VecNormalize of images) needs ``normalize_images=False``; with True, SB3 asserts."""
    env = FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, channel_first=True, discrete=True)
    vec_env = VecNormalize(DummyVecEnv([lambda: env]))
    kwargs = cnn_kwargs(model_class, normalize_images=normalize_images)
    if normalize_images:
        with pytest.raises(AssertionError):
            model_class("CnnPolicy", vec_env, seed=1, **kwargs).learn(64)
    else:
        model_class("CnnPolicy", vec_env, seed=1, **kwargs).learn(64)
