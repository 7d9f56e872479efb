"""
The cheaper per-step path of SB3's actor-critic policies (:class:`FastActorCriticMixin`), and SB3's three actor-critic
policies with it (same arguments, networks, outputs and random stream).
"""

from __future__ import annotations

from typing import Any

import torch as th
from stable_baselines3.common import policies as sb3_policies
from stable_baselines3.common.distributions import Distribution, StateDependentNoiseDistribution
from stable_baselines3.common.type_aliases import Schedule

from sb3_grpo.common.distributions import (
    has_direct_path,
    multi_tensor_adam,
    sample_gsde_weights,
    sample_with_log_prob,
    set_distribution,
)

__all__ = ["ActorCriticCnnPolicy", "ActorCriticPolicy", "FastActorCriticMixin", "MultiInputActorCriticPolicy"]


class FastActorCriticMixin:
    """For subclasses of SB3's ``ActorCriticPolicy``: the same networks, outputs and random stream, less overhead.

    ``forward`` (the rollout's per-step call) samples Categorical, diagonal Gaussian and unsquashed gSDE actions
    without building distribution objects (:func:`sample_with_log_prob`), every distribution the policy builds
    skips torch's argument validation (:func:`set_distribution`), gSDE's noise matrices are drawn without it too
    (:func:`sample_gsde_weights`), and an Adam optimizer runs torch's multi-tensor implementation
    (:func:`multi_tensor_adam`). Other distributions (squashed gSDE, Bernoulli, MultiCategorical) take SB3's path
    unchanged.
    """

    def forward(self, obs: th.Tensor, deterministic: bool = False) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        policy: Any = self
        if deterministic:
            return super().forward(obs, deterministic)  # type: ignore[misc]
        features = policy.extract_features(obs)
        if policy.share_features_extractor:
            latent_pi, latent_vf = policy.mlp_extractor(features)
        else:
            pi_features, vf_features = features
            latent_pi = policy.mlp_extractor.forward_actor(pi_features)
            latent_vf = policy.mlp_extractor.forward_critic(vf_features)
        values = policy.value_net(latent_vf)
        sampled = None
        if has_direct_path(policy.action_dist):
            mean_actions = policy.action_net(latent_pi)
            sampled = sample_with_log_prob(policy.action_dist, mean_actions, getattr(policy, "log_std", None), latent_pi)
        if sampled is None:
            distribution = policy._get_action_dist_from_latent(latent_pi)
            actions = distribution.get_actions()
            log_prob = distribution.log_prob(actions)
        else:
            actions, log_prob = sampled
        actions = actions.reshape((-1, *policy.action_space.shape))
        return actions, values, log_prob

    def reset_noise(self, n_envs: int = 1) -> None:
        policy: Any = self
        if isinstance(policy.action_dist, StateDependentNoiseDistribution):
            sample_gsde_weights(policy.action_dist, policy.log_std, n_envs)
        else:
            super().reset_noise(n_envs)  # type: ignore[misc]  # SB3's error

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)  # type: ignore[misc]
        multi_tensor_adam(self.optimizer)  # type: ignore[attr-defined]

    def _get_action_dist_from_latent(self, latent_pi: th.Tensor) -> Distribution:
        policy: Any = self
        if has_direct_path(policy.action_dist):
            mean_actions = policy.action_net(latent_pi)
            if set_distribution(policy.action_dist, mean_actions, getattr(policy, "log_std", None), latent_pi):
                return policy.action_dist
        return super()._get_action_dist_from_latent(latent_pi)  # type: ignore[misc]


class ActorCriticPolicy(FastActorCriticMixin, sb3_policies.ActorCriticPolicy):
    """SB3's :class:`~stable_baselines3.common.policies.ActorCriticPolicy` (same arguments, networks and outputs)
    with the fast per-step path."""


class ActorCriticCnnPolicy(FastActorCriticMixin, sb3_policies.ActorCriticCnnPolicy):
    """SB3's CNN actor-critic policy with the fast per-step path."""


class MultiInputActorCriticPolicy(FastActorCriticMixin, sb3_policies.MultiInputActorCriticPolicy):
    """SB3's dict-observation actor-critic policy with the fast per-step path."""
