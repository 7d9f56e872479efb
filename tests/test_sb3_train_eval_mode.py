"""SB3 conformance: train/eval mode with BatchNorm and Dropout (SB3 ``tests/test_train_eval_mode.py``): training
updates the BatchNorm statistics, collecting rollouts and predicting do not, and predict is deterministic."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params
from stable_baselines3.common.preprocessing import get_flattened_obs_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


class FlattenBatchNormDropoutExtractor(BaseFeaturesExtractor):
    """Flatten, then BatchNorm1d and Dropout(0.5) (SB3's test extractor)."""

    def __init__(self, observation_space: gym.Space):
        super().__init__(observation_space, get_flattened_obs_dim(observation_space))
        self.flatten = nn.Flatten()
        self.batch_norm = nn.BatchNorm1d(self._features_dim)
        self.dropout = nn.Dropout(0.5)

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.dropout(self.batch_norm(self.flatten(observations)))


POLICY_KWARGS = dict(net_arch=[16, 16], features_extractor_class=FlattenBatchNormDropoutExtractor)


def clone_batch_norm_stats(model) -> tuple[th.Tensor, th.Tensor]:
    batch_norm = model.policy.features_extractor.batch_norm
    return batch_norm.bias.clone(), batch_norm.running_mean.clone()


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_train_with_batch_norm(model_class, env_id):
    """Training moves the BatchNorm bias and running mean (the actor's extractor is in train mode while training)."""
    model = model_class("MlpPolicy", env_id, policy_kwargs=POLICY_KWARGS, seed=1, **algo_kwargs(model_class))
    bias_before, running_mean_before = clone_batch_norm_stats(model)
    model.learn(total_timesteps=200)
    bias_after, running_mean_after = clone_batch_norm_stats(model)
    assert ~th.isclose(bias_before, bias_after).all()
    assert ~th.isclose(running_mean_before, running_mean_after).all()


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_collect_rollouts_with_batch_norm(model_class, env_id):
    """``_setup_learn`` then ``collect_rollouts`` (a custom training loop): the policy runs in eval mode, the BatchNorm
    statistics stay as they were."""
    model = model_class("MlpPolicy", env_id, policy_kwargs=POLICY_KWARGS, seed=1, **algo_kwargs(model_class))
    bias_before, running_mean_before = clone_batch_norm_stats(model)
    _total_timesteps, callback = model._setup_learn(total_timesteps=2 * 64)
    for _ in range(2):
        assert model.collect_rollouts(model.get_env(), callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
    bias_after, running_mean_after = clone_batch_norm_stats(model)
    assert th.isclose(bias_before, bias_after).all()
    assert th.isclose(running_mean_before, running_mean_after).all()


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_predict_with_dropout_batch_norm(model_class, env_id):
    """predict is in eval mode: repeated deterministic predictions agree (no dropout) and the statistics stay."""
    model = model_class("MlpPolicy", env_id, policy_kwargs=POLICY_KWARGS, seed=1, verbose=1, **algo_kwargs(model_class))
    stats_before = clone_batch_norm_stats(model)
    observation = model.get_env().reset()
    first_prediction, _ = model.predict(observation, deterministic=True)
    for _ in range(5):
        prediction, _ = model.predict(observation, deterministic=True)
        np.testing.assert_allclose(first_prediction, prediction)
    for before, after in zip(stats_before, clone_batch_norm_stats(model), strict=True):
        assert th.isclose(before, after).all()
