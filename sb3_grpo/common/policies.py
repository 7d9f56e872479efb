"""
Actor-only policies, for the algorithms without a critic: a features extractor, a policy MLP and the action
distribution.
No value network exists at all, so such a policy has exactly the parameters of the actor part of SB3's
``ActorCriticPolicy``.

The fast distribution paths live in :mod:`sb3_grpo.common.distributions`, the actor-critic policies' cheaper
per-step path in :mod:`sb3_grpo.common.actor_critic` and :func:`frozen_copy` in :mod:`sb3_grpo.common.reference`;
their names stay importable from here.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
    make_proba_distribution,
)
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.torch_layers import (
    BaseFeaturesExtractor,
    CombinedExtractor,
    FlattenExtractor,
    NatureCNN,
    create_mlp,
)
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import nn

from sb3_grpo.common.actor_critic import FastActorCriticMixin
from sb3_grpo.common.distributions import (
    log_prob_and_entropy,
    multi_tensor_adam,
    sample_gsde_weights,
    sample_with_log_prob,
    set_distribution,
)
from sb3_grpo.common.reference import frozen_copy

__all__ = [
    "ActorPolicy",
    "CnnPolicy",
    "FastActorCriticMixin",
    "MlpPolicy",
    "MultiInputPolicy",
    "actor_net_arch",
    "env_actions",
    "frozen_copy",
    "log_prob_and_entropy",
    "multi_tensor_adam",
    "sample_gsde_weights",
    "sample_with_log_prob",
    "set_distribution",
]


def actor_net_arch(net_arch: Any, default: list[int] | None = None) -> list[int]:
    """The hidden layer sizes of an actor-only policy from any ``net_arch`` form SB3's ``ActorCriticPolicy`` accepts.

    ``None`` gives ``default`` (``[64, 64]`` unless given); a list of ints is used as is; ``dict(pi=[...],
    vf=[...])`` uses ``pi`` (``vf`` is ignored with a warning: the policy has no value network); SB3's older
    ``[dict(pi=[...], vf=[...])]`` (a list holding one such dict) is converted with SB3's deprecation warning, then
    read as the dict.

    :raises ValueError: for any other form, saying which forms are accepted.
    """
    if isinstance(net_arch, (list, tuple)) and len(net_arch) > 0 and isinstance(net_arch[0], dict):
        if len(net_arch) != 1:
            raise ValueError(
                f"net_arch as a list of dicts must hold exactly one dict(pi=[...], vf=[...]) (SB3's older form), got "
                f"{net_arch!r}: pass net_arch=dict(pi=[...]) or a list of layer sizes."
            )
        warnings.warn(
            "As shared layers in the mlp_extractor are removed since SB3 v1.8.0, you should now pass directly a "
            "dictionary and not a list (net_arch=dict(pi=..., vf=...) instead of net_arch=[dict(pi=..., vf=...)])",
            stacklevel=3,
        )
        net_arch = net_arch[0]
    if net_arch is None:
        return [64, 64] if default is None else list(default)
    if isinstance(net_arch, dict):
        unknown = set(net_arch) - {"pi", "vf"}
        if unknown:
            raise ValueError(
                f"net_arch dict keys must be 'pi' (and 'vf', ignored: this policy has no value network), got {sorted(unknown)}"
            )
        if "vf" in net_arch:
            warnings.warn(
                f"This policy has no value network (the algorithm trains no critic): net_arch['vf'] = {net_arch['vf']!r} "
                f"is ignored (the actor uses "
                f"net_arch['pi'] = {list(net_arch.get('pi', []))!r}). Pass net_arch=dict(pi=[...]) or a list to "
                "silence this.",
                stacklevel=3,
            )
        net_arch = net_arch.get("pi", [])
    if not isinstance(net_arch, (list, tuple)) or not all(
        isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size > 0 for size in net_arch
    ):
        raise ValueError(
            f"net_arch must be a list of positive layer sizes, dict(pi=[...]) (a 'vf' entry is ignored) or SB3's "
            f"older [dict(pi=[...], vf=[...])], got {net_arch!r}"
        )
    return [int(size) for size in net_arch]


class ActorPolicy(BasePolicy):
    """
    Actor-only policy (no critic), for the algorithms that train no value network.

    Keyword arguments mirror SB3's ``ActorCriticPolicy`` so that ``policy_kwargs`` written for PPO carry over:
    a ``net_arch`` of the form ``dict(pi=[...], vf=[...])`` uses ``pi`` (the ``vf`` part is ignored with a
    warning: the policy has no value network).

    :param observation_space: observation space.
    :param action_space: action space (Discrete, MultiDiscrete, MultiBinary or Box).
    :param lr_schedule: learning rate schedule (the optimizer starts at ``lr_schedule(1)``).
    :param net_arch: hidden layer sizes of the policy network (default ``[64, 64]``; ``[]`` with ``NatureCNN``, as
        SB3), or ``dict(pi=[...])``, or SB3's older ``[dict(pi=[...], vf=[...])]`` (see :func:`actor_net_arch`).
    :param activation_fn: activation function.
    :param ortho_init: orthogonal initialisation (as SB3's PPO).
    :param use_sde: generalised state-dependent exploration (gSDE, Box action spaces): the action noise is
        ``latent(s) @ W`` for a noise matrix ``W`` drawn by :meth:`reset_noise` (one per env slot), so it changes
        smoothly with the state instead of independently at every step.
    :param log_std_init: initial log standard deviation (Box action spaces).
    :param full_std: with gSDE, one std per (latent unit, action) pair (``True``) or per latent unit.
    :param use_expln: with gSDE, ``expln`` instead of ``exp`` to keep the std positive (SB3's option).
    :param squash_output: with gSDE only (as SB3's ``ActorCriticPolicy``): squash the Gaussian actions with tanh into
        [-1, 1] and rescale them to the Box bounds before they reach the env; log-probabilities (hence the ratios and
        KL terms) are those of the squashed distribution. ``True`` without ``use_sde`` raises.
    :param features_extractor_class: features extractor class.
    :param features_extractor_kwargs: its keyword arguments.
    :param share_features_extractor: accepted for compatibility with PPO configs; there is only one network.
    :param normalize_images: divide image observations by 255.
    :param optimizer_class: optimizer class.
    :param optimizer_kwargs: its keyword arguments (excluding the learning rate).
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.Tanh,
        ortho_init: bool = True,
        use_sde: bool = False,
        log_std_init: float = 0.0,
        full_std: bool = True,
        use_expln: bool = False,
        squash_output: bool = False,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        share_features_extractor: bool = True,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
    ):
        if squash_output and not use_sde:
            raise ValueError(
                "squash_output=True is only available with gSDE (use_sde=True), as in SB3's ActorCriticPolicy: pass "
                "use_sde=True to the algorithm, or remove squash_output from policy_kwargs (without it, actions outside the "
                "Box bounds are clipped before they reach the env)."
            )
        if use_sde and not isinstance(action_space, spaces.Box):
            raise ValueError(
                f"use_sde=True needs continuous actions (a Box action space), got {type(action_space).__name__}: "
                "remove use_sde (and sde_sample_freq)."
            )
        if optimizer_kwargs is None:
            optimizer_kwargs = {}
            if optimizer_class == th.optim.Adam:
                optimizer_kwargs["eps"] = 1e-5  # as SB3's ActorCriticPolicy
        super().__init__(
            observation_space,
            action_space,
            features_extractor_class,
            features_extractor_kwargs,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
            normalize_images=normalize_images,
            squash_output=squash_output,
        )
        # SB3's default: no hidden layer after NatureCNN, [64, 64] otherwise
        self.net_arch = actor_net_arch(net_arch, default=[] if features_extractor_class == NatureCNN else [64, 64])
        self.activation_fn = activation_fn
        self.ortho_init = ortho_init
        self.log_std_init = log_std_init
        self.use_sde = use_sde
        self.full_std = full_std
        self.use_expln = use_expln
        self.share_features_extractor = share_features_extractor
        self.features_extractor = self.make_features_extractor()
        self.features_dim = self.features_extractor.features_dim
        dist_kwargs = {"full_std": full_std, "use_expln": use_expln, "squash_output": squash_output, "learn_features": False}
        self.action_dist = make_proba_distribution(action_space, use_sde=use_sde, dist_kwargs=dist_kwargs if use_sde else None)
        self._build(lr_schedule)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            dict(
                net_arch=self.net_arch,
                activation_fn=self.activation_fn,
                ortho_init=self.ortho_init,
                log_std_init=self.log_std_init,
                use_sde=self.use_sde,
                full_std=self.full_std,
                use_expln=self.use_expln,
                squash_output=self.squash_output,
                lr_schedule=self._dummy_schedule,  # dummy lr schedule, not needed for loading policy alone
                share_features_extractor=self.share_features_extractor,
                features_extractor_class=self.features_extractor_class,
                features_extractor_kwargs=self.features_extractor_kwargs,
                optimizer_class=self.optimizer_class,
                optimizer_kwargs=self.optimizer_kwargs,
                normalize_images=self.normalize_images,
            )
        )
        return data

    def _build(self, lr_schedule: Schedule) -> None:
        self.policy_net = nn.Sequential(*create_mlp(self.features_dim, 0, self.net_arch, self.activation_fn))
        latent_dim = self.net_arch[-1] if self.net_arch else self.features_dim
        if isinstance(self.action_dist, DiagGaussianDistribution):
            self.action_net, self.log_std = self.action_dist.proba_distribution_net(
                latent_dim=latent_dim, log_std_init=self.log_std_init
            )
        elif isinstance(self.action_dist, StateDependentNoiseDistribution):
            self.action_net, self.log_std = self.action_dist.proba_distribution_net(
                latent_dim=latent_dim, latent_sde_dim=latent_dim, log_std_init=self.log_std_init
            )
        elif isinstance(self.action_dist, (CategoricalDistribution, MultiCategoricalDistribution, BernoulliDistribution)):
            self.action_net = self.action_dist.proba_distribution_net(latent_dim=latent_dim)
        else:  # pragma: no cover - make_proba_distribution only returns the above without gSDE
            raise NotImplementedError(f"Unsupported distribution '{self.action_dist}'.")

        if self.ortho_init:
            gains = {self.features_extractor: np.sqrt(2), self.policy_net: np.sqrt(2), self.action_net: 0.01}
            for module, gain in gains.items():
                module.apply(partial(self.init_weights, gain=gain))
        optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]
        self.optimizer = multi_tensor_adam(optimizer)

    def _latent(self, obs: PyTorchObs) -> th.Tensor:
        return self.policy_net(self.extract_features(obs, self.features_extractor))

    def _distribution(self, obs: PyTorchObs) -> Distribution:
        latent = self._latent(obs)
        return self._distribution_from(latent, self.action_net(latent))

    def _distribution_from(self, latent: th.Tensor, mean_actions: th.Tensor) -> Distribution:
        if set_distribution(self.action_dist, mean_actions, getattr(self, "log_std", None), latent):
            return self.action_dist
        if isinstance(self.action_dist, DiagGaussianDistribution):
            return self.action_dist.proba_distribution(mean_actions, self.log_std)
        if isinstance(self.action_dist, StateDependentNoiseDistribution):
            return self.action_dist.proba_distribution(mean_actions, self.log_std, latent)
        return self.action_dist.proba_distribution(action_logits=mean_actions)  # type: ignore[call-arg]

    def reset_noise(self, n_envs: int = 1, indices: Any = None) -> None:
        """Draw new gSDE noise matrices: ``n_envs`` of them, or only those of the slots in ``indices`` (the others
        are kept, so a running trajectory keeps its exploration noise)."""
        if not isinstance(self.action_dist, StateDependentNoiseDistribution):
            raise ValueError("reset_noise() is only meaningful with gSDE (use_sde=True).")
        previous = self.action_dist.exploration_matrices
        sample_gsde_weights(self.action_dist, self.log_std, n_envs)
        if indices is None or previous is None or previous.shape != self.action_dist.exploration_matrices.shape:
            return
        keep = np.ones(n_envs, dtype=bool)
        keep[np.asarray(indices, dtype=np.int64)] = False
        matrices = self.action_dist.exploration_matrices.clone()
        matrices[th.as_tensor(keep)] = previous[th.as_tensor(keep)]
        self.action_dist.exploration_matrices = matrices

    def get_distribution(self, obs: PyTorchObs) -> Distribution:
        """The action distribution at the given observations."""
        return self._distribution(obs)

    def forward(self, obs: PyTorchObs, deterministic: bool = False) -> tuple[th.Tensor, th.Tensor]:
        """Sample actions and return them with their log-probabilities (Categorical, Gaussian and unsquashed gSDE:
        without distribution objects, same values and random stream, see :func:`sample_with_log_prob`)."""
        latent = self._latent(obs)
        mean_actions = self.action_net(latent)
        sampled = None
        if not deterministic:
            sampled = sample_with_log_prob(self.action_dist, mean_actions, getattr(self, "log_std", None), latent)
        if sampled is None:
            distribution = self._distribution_from(latent, mean_actions)
            actions = distribution.get_actions(deterministic=deterministic)
            log_prob = distribution.log_prob(actions)
        else:
            actions, log_prob = sampled
        actions = actions.reshape((-1, *self.action_space.shape))  # type: ignore[misc]
        return actions, log_prob

    def evaluate_actions(self, obs: PyTorchObs, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor | None]:
        """Log-probability and entropy of ``actions`` under the current policy (Categorical and diagonal Gaussian:
        without distribution objects, same values and gradients, see :func:`log_prob_and_entropy`)."""
        latent = self._latent(obs)
        mean_actions = self.action_net(latent)
        evaluated = log_prob_and_entropy(self.action_dist, mean_actions, getattr(self, "log_std", None), actions)
        if evaluated is not None:
            return evaluated
        distribution = self._distribution_from(latent, mean_actions)
        return distribution.log_prob(actions), distribution.entropy()

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        return self._distribution(observation).get_actions(deterministic=deterministic)


MlpPolicy = ActorPolicy


class CnnPolicy(ActorPolicy):
    """Actor-only policy with SB3's NatureCNN features extractor (image observations). See :class:`ActorPolicy`."""

    def __init__(self, *args: Any, features_extractor_class: type[BaseFeaturesExtractor] = NatureCNN, **kwargs: Any):
        kwargs["features_extractor_class"] = features_extractor_class
        super().__init__(*args, **kwargs)


class MultiInputPolicy(ActorPolicy):
    """Actor-only policy for Dict observation spaces (SB3's CombinedExtractor). See :class:`ActorPolicy`."""

    def __init__(self, *args: Any, features_extractor_class: type[BaseFeaturesExtractor] = CombinedExtractor, **kwargs: Any):
        kwargs["features_extractor_class"] = features_extractor_class
        super().__init__(*args, **kwargs)


def env_actions(policy: BasePolicy, actions: np.ndarray) -> np.ndarray:
    """The actions a VecEnv is stepped with, from those ``policy`` sampled: on a Box action space, rescaled from [-1, 1]
    to the bounds when the policy squashes its output (gSDE), else clipped to the bounds (as SB3's PPO); other spaces'
    actions unchanged.

    :param policy: the policy that sampled them (its ``action_space`` and ``squash_output``).
    :param actions: ``(n_envs, *action_shape)`` sampled actions.
    """
    action_space = policy.action_space
    if not isinstance(action_space, spaces.Box):
        return actions
    if policy.squash_output:
        return policy.unscale_action(actions)
    return np.clip(actions, action_space.low, action_space.high)
