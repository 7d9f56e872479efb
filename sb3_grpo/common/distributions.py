"""
Fast paths of SB3's action distributions, for the actor-only and the actor-critic policies alike: sampling, log-probabilities
and entropies computed from the action net's output without building ``torch.distributions`` objects, distributions
set without torch's argument validation, and Adam on torch's multi-tensor implementation. Values, gradients and random
streams are bitwise those of SB3's own path (``tests/test_fast_paths.py``).
"""

from __future__ import annotations

import math
from typing import Any

import torch as th
from stable_baselines3.common.distributions import (
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    StateDependentNoiseDistribution,
)
from torch.distributions import Categorical, Normal
from torch.nn import functional as F

__all__ = [
    "has_direct_path",
    "log_prob_and_entropy",
    "multi_tensor_adam",
    "sample_gsde_weights",
    "sample_with_log_prob",
    "set_distribution",
]

_HALF_LOG_2PI = math.log(math.sqrt(2 * math.pi))  # the constant of torch's Normal.log_prob, computed the same way


def _gsde_std(action_dist: StateDependentNoiseDistribution, log_std: th.Tensor, latent_sde: th.Tensor) -> th.Tensor:
    """gSDE's per-state standard deviation, as ``StateDependentNoiseDistribution.proba_distribution`` computes it
    (``latent_sde`` already detached where SB3 detaches it)."""
    variance = th.mm(latent_sde**2, action_dist.get_std(log_std) ** 2)
    return th.sqrt(variance + action_dist.epsilon)


def _is_plain_gsde(action_dist: Distribution) -> bool:
    return type(action_dist) is StateDependentNoiseDistribution and action_dist.bijector is None


def has_direct_path(action_dist: Distribution) -> bool:
    """Whether :func:`set_distribution` and :func:`sample_with_log_prob` handle ``action_dist``'s type (given the
    policy's ``log_std`` and latent features, which SB3's policies have for these types)."""
    return type(action_dist) in (CategoricalDistribution, DiagGaussianDistribution) or _is_plain_gsde(action_dist)


def set_distribution(
    action_dist: Distribution, mean_actions: th.Tensor, log_std: th.Tensor | None, latent_sde: th.Tensor | None = None
) -> bool:
    """Set ``action_dist``'s torch distribution as SB3's ``proba_distribution`` does, without argument validation.

    torch validates a distribution's arguments (and every value given to ``log_prob``) by default; the checks only
    raise, they never change a value, and on a policy's own outputs they cost more than the small networks here.
    Categorical, diagonal Gaussian and gSDE without squashing (the exact SB3 types, not subclasses); gSDE needs the
    policy's latent features ``latent_sde``.

    :return: whether it was set (``False``: another distribution, use its own ``proba_distribution``).
    """
    kind = type(action_dist)
    if kind is CategoricalDistribution:
        action_dist.distribution = Categorical(logits=mean_actions, validate_args=False)  # type: ignore[attr-defined]
        return True
    if kind is DiagGaussianDistribution and log_std is not None:
        action_std = th.ones_like(mean_actions) * log_std.exp()
        action_dist.distribution = Normal(mean_actions, action_std, validate_args=False)  # type: ignore[attr-defined]
        return True
    if _is_plain_gsde(action_dist) and log_std is not None and latent_sde is not None:
        sde: Any = action_dist
        sde._latent_sde = latent_sde if sde.learn_features else latent_sde.detach()
        sde.distribution = Normal(mean_actions, _gsde_std(sde, log_std, sde._latent_sde), validate_args=False)
        return True
    return False


def sample_gsde_weights(action_dist: StateDependentNoiseDistribution, log_std: th.Tensor, batch_size: int) -> None:
    """SB3's ``StateDependentNoiseDistribution.sample_weights`` (same draws, same values, same autograd graph)
    without torch's argument validation of the weights' Normal."""
    std = action_dist.get_std(log_std)
    action_dist.weights_dist = Normal(th.zeros_like(std), std, validate_args=False)
    action_dist.exploration_mat = action_dist.weights_dist.rsample()
    action_dist.exploration_matrices = action_dist.weights_dist.rsample((batch_size,))


def multi_tensor_adam(optimizer: th.optim.Optimizer) -> th.optim.Optimizer:
    """``optimizer`` (an ``Adam`` left at ``foreach=None``, fused off) set to torch's multi-tensor (``foreach``)
    implementation, which torch uses by default on CUDA but not on CPU. Its updates are bitwise those of the per-tensor
    loop (``tests/test_fast_paths.py``) with a fraction of the Python-level ops: on the small MLPs of on-policy
    RL the optimizer step is otherwise 15-25% of the update. Other optimizers, and an explicit ``foreach`` or
    ``fused``, are left alone."""
    if type(optimizer) is th.optim.Adam:
        for group in optimizer.param_groups:
            if group.get("foreach") is None and not group.get("fused") and not group.get("differentiable"):
                group["foreach"] = True
    return optimizer


def _gaussian_log_prob(actions: th.Tensor, mean: th.Tensor, std: th.Tensor) -> th.Tensor:
    """``Normal(mean, std).log_prob(actions)`` summed over the action dimensions, as SB3 computes it."""
    log_prob = -((actions - mean) ** 2) / (2 * std**2) - std.log() - _HALF_LOG_2PI  # Normal.log_prob
    return log_prob.sum(dim=1) if log_prob.dim() > 1 else log_prob.sum()  # sum_independent_dims


def sample_with_log_prob(
    action_dist: Distribution, mean_actions: th.Tensor, log_std: th.Tensor | None, latent_sde: th.Tensor | None = None
) -> tuple[th.Tensor, th.Tensor] | None:
    """A sample of the policy's action distribution and its log-probability, from the action net's output, without
    building ``torch.distributions`` objects; ``None`` where there is no such path (use the distribution).

    Categorical, diagonal Gaussian and gSDE without squashing (the exact SB3 types; gSDE needs the policy's latent
    features ``latent_sde`` and uses the noise matrices drawn by ``reset_noise``): the same operations, in the same
    order, on the same random stream as SB3's ``distribution.sample()`` and ``distribution.log_prob()``, so actions and
    log-probabilities are bitwise those of SB3 (``tests/test_fast_paths.py``).
    """
    kind = type(action_dist)
    if kind is CategoricalDistribution:
        logits = mean_actions - mean_actions.logsumexp(dim=-1, keepdim=True)  # Categorical(logits=...)
        probs = F.softmax(logits, dim=-1)
        actions = th.multinomial(probs.reshape(-1, logits.shape[-1]), 1, True).T.reshape(logits.shape[:-1])
        log_prob = logits.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return actions, log_prob
    if kind is DiagGaussianDistribution and log_std is not None:
        std = th.ones_like(mean_actions) * log_std.exp()
        eps = th.empty(mean_actions.shape, dtype=mean_actions.dtype, device=mean_actions.device).normal_()
        actions = mean_actions + eps * std  # Normal.rsample
        return actions, _gaussian_log_prob(actions, mean_actions, std)
    if _is_plain_gsde(action_dist) and log_std is not None and latent_sde is not None:
        sde: Any = action_dist
        latent = latent_sde if sde.learn_features else latent_sde.detach()
        std = _gsde_std(sde, log_std, latent)
        actions = mean_actions + sde.get_noise(latent)
        return actions, _gaussian_log_prob(actions, mean_actions, std)
    return None


def log_prob_and_entropy(
    action_dist: Distribution, mean_actions: th.Tensor, log_std: th.Tensor | None, actions: th.Tensor
) -> tuple[th.Tensor, th.Tensor] | None:
    """The log-probability of ``actions`` and the entropy of the policy's action distribution, from the action net's
    output, without building ``torch.distributions`` objects; ``None`` where there is no such path.

    Categorical and diagonal Gaussian (the exact SB3 types): the operations of torch's ``Categorical`` / ``Normal``
    ``log_prob`` and ``entropy`` (with SB3's sums over action dimensions), in the same order, so values and gradients
    are bitwise those of ``distribution.log_prob(actions)`` and ``distribution.entropy()``
    (``tests/test_fast_paths.py``). Unlike :func:`set_distribution`, it leaves ``action_dist`` as it was.
    """
    kind = type(action_dist)
    if kind is CategoricalDistribution:
        logits = mean_actions - mean_actions.logsumexp(dim=-1, keepdim=True)  # Categorical(logits=...)
        log_prob = logits.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)  # Categorical.log_prob
        p_log_p = logits.clamp(min=th.finfo(logits.dtype).min) * F.softmax(logits, dim=-1)  # Categorical.entropy
        return log_prob, -p_log_p.sum(-1)
    if kind is DiagGaussianDistribution and log_std is not None:
        std = th.ones_like(mean_actions) * log_std.exp()
        entropy = 0.5 + 0.5 * math.log(2 * math.pi) + th.log(std)  # Normal.entropy
        entropy = entropy.sum(dim=1) if entropy.dim() > 1 else entropy.sum()  # sum_independent_dims
        return _gaussian_log_prob(actions, mean_actions, std), entropy
    return None
