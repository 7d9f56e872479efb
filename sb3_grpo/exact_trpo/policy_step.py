"""
ExactTRPO's policy step, as functions of the policy and the step's settings (:class:`StepSettings`): the trust
region's KL and its Hessian, the exact Fisher solve for the natural-gradient direction (on a subsample of the states,
refined to the whole batch's system), and the backtracking line search.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    DiagGaussianDistribution,
    Distribution,
    StateDependentNoiseDistribution,
    kl_divergence,
)
from stable_baselines3.common.preprocessing import get_action_dim
from torch import nn

from sb3_grpo.common.kl import distribution_parameters, exact_kl
from sb3_grpo.exact_trpo.actor import (
    actor_modules,
    actor_parameters,
    closed_form_fisher_problem,
    couples_states,
    directions_per_state,
    distribution_inputs,
    fixed_noise,
    has_noise_layers,
    index_obs,
    make_distribution,
)
from sb3_grpo.exact_trpo.fisher import ExactFisher
from sb3_grpo.exact_trpo.solvers import conjugate_gradient, preconditioned_refinement

__all__ = [
    "AUTO_FISHER_DIRECTIONS",
    "AUTO_WHOLE_BATCH_WORK",
    "StepSettings",
    "fisher_states",
    "kl_hessian_matvec",
    "mean_kl",
    "policy_distribution",
    "policy_step",
    "search_direction",
    "update_running_statistics",
]

#: ``fisher_subsample="auto"`` uses as many states as keep ``N * k`` (Fisher directions) at or below this.
AUTO_FISHER_DIRECTIONS = 1536
#: ``fisher_subsample="auto"`` for an actor differentiated through whole-batch forward passes (BatchNorm in training
#: mode, Dropout; see :func:`sb3_grpo.exact_trpo.actor.couples_states`): at most this many ``directions x batch states``
#: (each Fisher direction is a backward pass over the whole batch), e.g. 256 directions for a batch of 2048.
AUTO_WHOLE_BATCH_WORK = 2**19


def _flat(tensors: Any) -> th.Tensor:
    return th.cat([t.reshape(-1) for t in tensors])


def _scaled(matvec: Callable[[th.Tensor], th.Tensor], c: float) -> Callable[[th.Tensor], th.Tensor]:
    """``v -> c * matvec(v)``."""
    return lambda v: c * matvec(v)


@dataclass(frozen=True)
class StepSettings:
    """What one policy step reads besides the policy and the batch: ExactTRPO's arguments of the same names (documented
    there), the device, and the seed of the actor's noise layers during this step (``None``: no noise layers)."""

    target_kl: float
    cg_damping: float
    cg_max_steps: int
    line_search_max_iter: int
    line_search_shrinking_factor: float
    fisher_solver: str
    fisher_subsample: int | float | str | None
    fisher_memory_budget: int
    fisher_refine_tol: float | None
    kl_action_reduction: str
    device: th.device
    noise_seed: int | None = None


def fisher_states(
    policy: Any, settings: StepSettings, rng: np.random.Generator, n: int, k: int, exact: bool
) -> np.ndarray | None:
    """Indices of the Fisher's states among the ``n`` of the batch (``None``: all of them), drawn from ``rng``."""
    sub = settings.fisher_subsample
    if sub is None:
        return None
    if sub == "auto":
        directions = AUTO_FISHER_DIRECTIONS
        if _whole_batch_jacobians(policy):
            directions = min(directions, AUTO_WHOLE_BATCH_WORK // n)
        m = max(1, directions // max(k, 1)) if exact else n
    elif isinstance(sub, float):
        m = max(1, math.ceil(sub * n))
    else:
        m = int(sub)
    if m >= n:
        return None
    return np.sort(rng.choice(n, size=m, replace=False))


def _whole_batch_jacobians(policy: Any) -> bool:
    """Whether the exact Fisher takes one backward pass over the whole batch per direction: an actor with
    BatchNorm in training mode, or with Dropout and layers other than ``nn.Linear`` (no per-layer factorisation)."""
    if couples_states(policy):
        return True
    other_layers = any(
        not isinstance(m, nn.Linear) and any(True for _ in m.parameters(recurse=False)) for m in actor_modules(policy)
    )
    return has_noise_layers(policy) and other_layers


def _kl_scale(policy: Any, settings: StepSettings) -> float:
    """The trust region's KL over the whole action distribution's: ``1 / d`` for a distribution factorised over
    ``d`` action dimensions under ``kl_action_reduction="mean"``, else 1."""
    factorised = (DiagGaussianDistribution, StateDependentNoiseDistribution, BernoulliDistribution)
    if settings.kl_action_reduction == "mean" and isinstance(policy.action_dist, factorised):
        return 1.0 / get_action_dim(policy.action_space)
    return 1.0


def _state_kl(policy: Any, settings: StepSettings, old: th.Tensor | Distribution, new: Distribution) -> th.Tensor:
    """The trust region's ``KL(old || new)`` per state (reduced over action dimensions, see
    ``kl_action_reduction``); exact from stored parameters, or through torch for other distributions."""
    if isinstance(old, th.Tensor):
        total = exact_kl(old, new)
    else:
        kl = kl_divergence(old, new)
        total = kl.sum(dim=1) if kl.dim() > 1 else kl
    return _kl_scale(policy, settings) * total


def mean_kl(policy: Any, settings: StepSettings, old: th.Tensor | Distribution, new: Distribution) -> th.Tensor:
    """The trust region's ``KL(old || new)``: the mean over states of the per-state KL."""
    return _state_kl(policy, settings, old, new).mean()


def policy_distribution(policy: Any, settings: StepSettings, obs: Any) -> Distribution:
    """The policy's distribution on ``obs``: the policy step's forward pass (its noise layers seeded alike)."""
    with fixed_noise(settings.noise_seed, settings.device):
        return policy.get_distribution(obs)


def _old_distribution(policy: Any, settings: StepSettings, obs: Any) -> th.Tensor | Distribution:
    with th.no_grad():
        dist = policy_distribution(policy, settings, obs)
        if closed_form_fisher_problem(policy) is None:
            return distribution_parameters(dist).clone()
        return copy.copy(dist)


def kl_hessian_matvec(
    policy: Any, settings: StepSettings, obs: Any, params: list[nn.Parameter], rows: th.Tensor | None = None
) -> Callable[[th.Tensor], th.Tensor]:
    """``v -> H v``, ``H`` the Hessian of the mean KL at theta_old (= the Fisher), by double backpropagation.

    :param rows: the states whose KL is averaged (default: all), each from the forward pass over all of ``obs``.
    """
    if closed_form_fisher_problem(policy) is None:
        # the distribution the exact Fisher is formed on (distribution_inputs, in the actor's dtype)
        def distribution(observations: Any) -> Distribution:
            with fixed_noise(settings.noise_seed, settings.device):
                return make_distribution(policy, distribution_inputs(policy, observations))

        with th.no_grad():
            old: th.Tensor | Distribution = distribution_parameters(distribution(obs)).clone()
        new = distribution(obs)
    else:
        old, new = _old_distribution(policy, settings, obs), policy_distribution(policy, settings, obs)
    kl = _state_kl(policy, settings, old, new)
    kl = (kl if rows is None else kl[rows]).mean()
    grad_kl = _flat(th.autograd.grad(kl, params, create_graph=True))

    def matvec(v: th.Tensor) -> th.Tensor:
        return _flat(th.autograd.grad(grad_kl @ v, params, retain_graph=True)).detach()

    return matvec


def search_direction(
    policy: Any, settings: StepSettings, rng: np.random.Generator, obs: Any, params: list[nn.Parameter], g: th.Tensor
) -> tuple[th.Tensor, dict[str, Any]]:
    """``x`` with ``(F + damping I) x = g`` and what the solve did (solver, Fisher states, refinement; ``"fallback"``:
    why conjugate gradients replaced the exact solve that ``fisher_solver="auto"`` would have used).

    :param rng: draws the Fisher's states (see :func:`fisher_states`).
    """
    n = len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)
    closed_form = closed_form_fisher_problem(policy) is None
    want_exact = closed_form and settings.fisher_solver != "cg"
    k = directions_per_state(policy) if closed_form else 1
    idx = fisher_states(policy, settings, rng, n, k, exact=want_exact)
    idx_t = None if idx is None else th.as_tensor(idx, device=settings.device)
    # an actor whose output at a state depends on the batch (BatchNorm) or on noise (Dropout): every state's
    # output is that of the forward pass over the whole batch, as in the gradient and the line search
    whole_batch = couples_states(policy) or has_noise_layers(policy)
    obs_f = obs if idx_t is None or whole_batch else index_obs(obs, idx_t)
    rows_f = idx_t if whole_batch else None
    info: dict[str, Any] = {"fisher_states": n if idx is None else len(idx), "fisher_refine_steps": 0}
    batch_fisher: ExactFisher | None = None  # the whole batch's structured Fisher, when the solve is refined on it
    fisher: ExactFisher | None
    refine = want_exact and idx_t is not None and settings.fisher_refine_tol is not None

    def exact_fisher(states: th.Tensor | None) -> ExactFisher:
        return ExactFisher(policy, obs, params=params, states=states, noise_seed=settings.noise_seed)

    if refine:
        assert idx_t is not None
        batch_fisher = exact_fisher(None)
        fisher = batch_fisher.subset(idx_t) if batch_fisher.structured else exact_fisher(idx_t)
    else:
        fisher = exact_fisher(idx_t) if closed_form else None
    # The system is (H + damping I) x = g, H = c F the Hessian of the trust region's KL (c: _kl_scale), so
    # x = (F + (damping / c) I)^-1 g / c.
    damping, c = settings.cg_damping, _kl_scale(policy, settings)
    if fisher is not None and want_exact:
        space = fisher.cheaper_space()
        need = fisher.memory_bytes(space)
        if settings.fisher_solver == "exact" or need <= settings.fisher_memory_budget:
            factorised = fisher.factorize(damping / c, space=space)

            def precondition(v: th.Tensor) -> th.Tensor:
                return factorised(v) / c

            info["fisher_solver"] = f"exact-{space}"
            if not refine:
                return precondition(g), info
            assert batch_fisher is not None and settings.fisher_refine_tol is not None
            matvec = (
                _scaled(batch_fisher.matvec, c)
                if batch_fisher.structured
                else kl_hessian_matvec(policy, settings, obs, params)  # includes c
            )
            x, steps, residual = preconditioned_refinement(
                lambda v: matvec(v) + damping * v, precondition, g, settings.cg_max_steps, settings.fisher_refine_tol
            )
            info.update(fisher_refine_steps=steps, fisher_residual=residual)
            return x, info
        info["fallback"] = (
            f"the exact Fisher solve would need {need / 2**20:.0f} MiB (> fisher_memory_budget="
            f"{settings.fisher_memory_budget / 2**20:.0f} MiB); using {settings.cg_max_steps} conjugate-gradient steps "
            "instead."
        )
    elif not closed_form and settings.fisher_solver == "auto":
        info["fallback"] = f"{closed_form_fisher_problem(policy)}; using conjugate gradients on the Hessian of the KL."
    cg_matvec = (
        _scaled(fisher.matvec, c)
        if fisher is not None and fisher.structured
        else kl_hessian_matvec(policy, settings, obs_f, params, rows=rows_f)  # includes c
    )
    x = conjugate_gradient(lambda v: cg_matvec(v) + damping * v, g, settings.cg_max_steps)
    info["fisher_solver"] = "cg"
    return x, info


def policy_step(
    policy: Any,
    settings: StepSettings,
    rng: np.random.Generator,
    obs: Any,
    actions: th.Tensor,
    old_log_prob: th.Tensor,
    advantages: th.Tensor,
) -> dict[str, Any]:
    """One natural-gradient step of the actor's parameters, in place, and what it did (the ``train/`` statistics;
    ``"no_step"``: why no step was taken; ``"fallback"``: see :func:`search_direction`).

    :param rng: draws the Fisher's states (see :func:`fisher_states`).
    """
    params = [p for _, p in actor_parameters(policy, index_obs(obs, slice(0, 2)))]
    old = _old_distribution(policy, settings, obs)
    distribution = policy_distribution(policy, settings, obs)
    objective = (advantages * th.exp(distribution.log_prob(actions) - old_log_prob)).mean()
    g = _flat(th.autograd.grad(objective, params))
    objective = objective.detach()

    x, info = search_direction(policy, settings, rng, obs, params, g)
    gx = float(g @ x)
    stats: dict[str, Any] = {
        "fisher_residual": float("nan"),
        **info,
        "policy_objective": float(objective),
        "kl": 0.0,
        "step_size": 0.0,
        "line_search_steps": 0,
        "is_line_search_success": 0.0,
        "expected_improvement": 0.0,
        "surrogate_improvement": 0.0,
    }
    if not math.isfinite(gx) or gx <= 0:
        stats["no_step"] = f"g^T F^-1 g = {gx!r} is not positive (zero or broken gradient); no policy step."
        return stats
    step_size = math.sqrt(2 * settings.target_kl / gx)
    stats["expected_improvement"] = step_size * gx
    originals = [p.detach().clone() for p in params]
    coef = 1.0
    with th.no_grad():
        for i in range(settings.line_search_max_iter):
            start = 0
            for p, original in zip(params, originals, strict=True):
                p.copy_(original + (coef * step_size) * x[start : start + p.numel()].view_as(p))
                start += p.numel()
            distribution = policy_distribution(policy, settings, obs)
            new_objective = (advantages * th.exp(distribution.log_prob(actions) - old_log_prob)).mean()
            kl = float(mean_kl(policy, settings, old, distribution))
            improvement = float(new_objective - objective)
            stats["line_search_steps"] = i + 1
            if kl <= settings.target_kl and improvement > 0:
                stats.update(
                    kl=kl,
                    step_size=coef * step_size,
                    is_line_search_success=1.0,
                    surrogate_improvement=improvement,
                    policy_objective=float(new_objective),
                )
                return stats
            coef *= settings.line_search_shrinking_factor
        for p, original in zip(params, originals, strict=True):
            p.copy_(original)
    return stats


def update_running_statistics(policy: Any, settings: StepSettings, obs: Any) -> None:
    """One training-mode forward pass of the actor on the policy batch, at the accepted parameters, for the
    running statistics of its BatchNorm layers (the policy step's own forward passes leave them untouched)."""
    if any(
        isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats for m in actor_modules(policy)
    ):
        with th.no_grad():
            policy_distribution(policy, settings, obs)
