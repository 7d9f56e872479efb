"""
The actor of an SB3 ``ActorCriticPolicy`` as the Fisher sees it: the network part ``z(s)`` of the action
distribution's parameters (logits, the Gaussian mean; for gSDE also the per-state standard deviation), the modules
and parameters it goes through, and the forward-pass conditions (BatchNorm coupling the states, Dropout noise) that
ExactTRPO's policy step and :class:`~sb3_grpo.exact_trpo.fisher.ExactFisher` must reproduce.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from torch import nn
from torch.distributions import Normal
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import _DropoutNd

from sb3_grpo.common.distributions import set_distribution
from sb3_grpo.common.kl import supports_exact_kl

__all__ = [
    "ActorHead",
    "actor_modules",
    "actor_outputs",
    "actor_parameters",
    "batched_vjp",
    "closed_form_fisher_problem",
    "couples_states",
    "directions_per_state",
    "distribution_inputs",
    "fixed_noise",
    "flat_to_params",
    "has_noise_layers",
    "index_obs",
    "make_distribution",
    "preprocessed_observations",
    "preserved_buffers",
]


def closed_form_fisher_problem(policy: ActorCriticPolicy) -> str | None:
    """Why the policy's Fisher has no closed form here (``None`` when it has one)."""
    dist = policy.action_dist
    if not supports_exact_kl(dist):  # the Fisher is the Hessian of the KL: closed forms for the same distributions
        return (
            f"{type(dist).__name__} has no closed-form Fisher here (supported: Categorical, MultiCategorical, "
            "Bernoulli, diagonal Gaussian with a state-independent log_std, and gSDE)"
        )
    if isinstance(dist, (DiagGaussianDistribution, StateDependentNoiseDistribution)) and not isinstance(
        getattr(policy, "log_std", None), nn.Parameter
    ):
        return "the Gaussian policy has no log_std parameter"
    return None


def _cast_obs(obs: Any, dtype: th.dtype) -> Any:
    if isinstance(obs, dict):
        return {key: value.to(dtype) for key, value in obs.items()}
    return obs.to(dtype)


def index_obs(obs: Any, idx: Any) -> Any:
    if isinstance(obs, dict):
        return {key: value[idx] for key, value in obs.items()}
    return obs[idx]


def _actor_dtype(policy: ActorCriticPolicy) -> th.dtype:
    weight: th.Tensor = policy.action_net.weight  # type: ignore[assignment]  # SB3 types action_net as nn.Module
    return weight.dtype


def preprocessed_observations(policy: ActorCriticPolicy, obs: Any) -> Any:
    """SB3's ``preprocess_obs`` (one-hot encoding of ``Discrete`` / ``MultiDiscrete`` parts, image scaling), cast to
    the dtype of the actor's parameters (float64 policies included: SB3's preprocessing casts to float32)."""
    pre = preprocess_obs(obs, policy.observation_space, normalize_images=policy.normalize_images)
    return _cast_obs(pre, _actor_dtype(policy))


def _gsde_std(policy: ActorCriticPolicy, latent: th.Tensor) -> th.Tensor:
    """gSDE's per-state standard deviation, as SB3's ``StateDependentNoiseDistribution.proba_distribution``."""
    dist: StateDependentNoiseDistribution = policy.action_dist  # type: ignore[assignment]  # checked by the caller
    latent_sde = latent if dist.learn_features else latent.detach()
    variance = th.mm(latent_sde**2, dist.get_std(policy.log_std) ** 2)
    return th.sqrt(variance + dist.epsilon)


def actor_outputs(policy: ActorCriticPolicy, preprocessed: Any) -> th.Tensor:
    """:func:`distribution_inputs` from observations already through :func:`preprocessed_observations`."""
    latent = policy.mlp_extractor.forward_actor(policy.pi_features_extractor(preprocessed))
    mean = policy.action_net(latent)
    if isinstance(policy.action_dist, StateDependentNoiseDistribution):
        return th.cat([mean, _gsde_std(policy, latent)], dim=1)
    return mean


def distribution_inputs(policy: ActorCriticPolicy, obs: Any) -> th.Tensor:
    """The network part of the action distribution's parameters: logits, or the Gaussian mean, ``(N, d)``; for gSDE
    the mean and the per-state standard deviation, ``(N, 2 * action_dim)``.

    Works in the dtype of the actor's parameters (float64 policies included: SB3's preprocessing casts to float32).
    """
    return actor_outputs(policy, preprocessed_observations(policy, obs))


def make_distribution(policy: ActorCriticPolicy, z: th.Tensor) -> Distribution:
    """The policy's SB3 distribution built from :func:`distribution_inputs` (closed-form distributions only).

    gSDE: a copy of the policy's distribution whose Gaussian is ``N(mean, std^2)`` from ``z``: its ``log_prob``,
    ``entropy``, ``mode`` and KL are the policy's; sampling needs the latent features (use ``get_distribution``).
    """
    dist = policy.action_dist
    if isinstance(dist, StateDependentNoiseDistribution):
        mean, std = th.chunk(z, 2, dim=1)
        out = copy.copy(dist)
        out.distribution = Normal(mean, std, validate_args=False)  # own outputs: the checks could only raise
        return out
    if set_distribution(dist, z, getattr(policy, "log_std", None)):  # Categorical, Gaussian: without validation
        return dist
    if isinstance(dist, DiagGaussianDistribution):
        return dist.proba_distribution(z, policy.log_std)
    return dist.proba_distribution(action_logits=z)


def actor_modules(policy: ActorCriticPolicy) -> Iterator[nn.Module]:
    """The modules the action distribution goes through: the actor's features extractor, the policy part of the
    MLP extractor (the whole extractor when it has no ``policy_net``) and ``action_net``."""
    mlp = policy.mlp_extractor
    for part in (policy.pi_features_extractor, getattr(mlp, "policy_net", mlp), policy.action_net):
        yield from part.modules()


def couples_states(policy: ActorCriticPolicy) -> bool:
    """Whether the actor's output at a state depends on the other states of the batch: a BatchNorm layer that
    normalises with the batch's statistics (training mode, or no running statistics)."""
    return any(
        isinstance(module, _BatchNorm) and (module.training or not module.track_running_stats)
        for module in actor_modules(policy)
    )


def has_noise_layers(policy: ActorCriticPolicy) -> bool:
    """Whether the actor draws random numbers in its forward pass: a Dropout layer in training mode with ``p > 0``."""
    return any(isinstance(m, _DropoutNd) and m.training and m.p > 0 for m in actor_modules(policy))


@contextlib.contextmanager
def fixed_noise(seed: int | None, device: th.device | str) -> Iterator[None]:
    """Run the enclosed forward pass with torch's generators seeded with ``seed``, restored on exit: noise layers
    (Dropout) draw the same masks at every forward pass of the same batch. ``None``: do nothing."""
    if seed is None:
        yield
        return
    devices = list(range(th.cuda.device_count())) if th.device(device).type == "cuda" else []
    with th.random.fork_rng(devices=devices):
        th.manual_seed(seed)
        yield


@contextlib.contextmanager
def preserved_buffers(module: nn.Module) -> Iterator[None]:
    """Restore the module's buffers (BatchNorm running statistics and counters) on exit: forward passes inside leave
    no trace on them."""
    saved = [(buffer, buffer.detach().clone()) for buffer in module.buffers()]
    try:
        yield
    finally:
        with th.no_grad():
            for buffer, value in saved:
                buffer.copy_(value)


def actor_parameters(policy: ActorCriticPolicy, obs: Any) -> list[tuple[str, nn.Parameter]]:
    """The trainable parameters the action distribution depends on, in ``named_parameters`` order.

    Found through the autograd graph of the distribution on ``obs`` (a few states suffice), so value-function
    parameters are excluded whatever their names.
    """
    named = [(name, p) for name, p in policy.named_parameters() if p.requires_grad]
    with preserved_buffers(policy):  # restored after the backward pass, which may need them (BatchNorm)
        z = distribution_inputs(policy, obs)
        out = z.sum()
        log_std = getattr(policy, "log_std", None)
        if isinstance(log_std, nn.Parameter):
            out = out + log_std.sum()
        grads = th.autograd.grad(out, [p for _, p in named], allow_unused=True)
    return [(name, p) for (name, p), grad in zip(named, grads, strict=True) if grad is not None]


def directions_per_state(policy: ActorCriticPolicy) -> int:
    """``k``: the number of columns of the distribution's Fisher factor ``A`` (see :func:`distribution_fisher_factor`)."""
    dist = policy.action_dist
    if isinstance(dist, MultiCategoricalDistribution):
        return sum(1 if int(n) == 2 else int(n) for n in dist.action_dims)
    if isinstance(dist, CategoricalDistribution):
        return 1 if dist.action_dim == 2 else int(dist.action_dim)
    if isinstance(dist, BernoulliDistribution):
        return int(dist.action_dims)
    if isinstance(dist, StateDependentNoiseDistribution):
        return 2 * int(dist.action_dim)  # mean and standard deviation
    return int(dist.action_dim)  # type: ignore[attr-defined]  # every SB3 distribution sets it; the base class does not declare it


def flat_to_params(flat: th.Tensor, params: list[nn.Parameter]) -> list[th.Tensor]:
    """Split a flat vector into views shaped like ``params``."""
    out, start = [], 0
    for p in params:
        out.append(flat[start : start + p.numel()].view_as(p))
        start += p.numel()
    return out


class ActorHead(nn.Module):
    """The policy as a module whose forward is :func:`distribution_inputs` (for ``torch.func.functional_call``)."""

    def __init__(self, policy: ActorCriticPolicy):
        super().__init__()
        self.policy = policy

    def forward(self, preprocessed: Any) -> th.Tensor:
        return actor_outputs(self.policy, preprocessed)


def batched_vjp(output: th.Tensor, params: list[nn.Parameter], grad_outputs: th.Tensor) -> th.Tensor:
    """``(B, P)``: the flat gradients of ``sum(grad_outputs[b] * output)`` for each ``b``, in one batched backward pass
    (one pass per row when an operation has no batching rule)."""

    def flat(grads: tuple[th.Tensor | None, ...], lead: tuple[int, ...]) -> th.Tensor:
        parts = [g if g is not None else p.new_zeros(*lead, *p.shape) for g, p in zip(grads, params, strict=True)]
        return th.cat([part.reshape(*lead, -1) for part in parts], dim=-1)

    try:
        grads = th.autograd.grad(
            output, params, grad_outputs=grad_outputs, is_grads_batched=True, retain_graph=True, allow_unused=True
        )
        result = flat(grads, (len(grad_outputs),))
    except RuntimeError:  # an operation without a batching rule
        rows = [
            flat(th.autograd.grad(output, params, grad_outputs=row, retain_graph=True, allow_unused=True), ())
            for row in grad_outputs
        ]
        result = th.stack(rows)
    return result
