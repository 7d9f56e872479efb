"""GRPO's objective: the per-step loss (clipped surrogate and k3 KL to the reference) and the loss weights of the
``loss_type`` normalisations."""

from __future__ import annotations

import numpy as np
import torch as th

from sb3_grpo.common.groups.buffers import trajectory_sums
from sb3_grpo.common.kl import kl_estimate

__all__ = [
    "GROUP_LOSS_SCALES",
    "IMPORTANCE_SAMPLING_LEVELS",
    "LOSS_TYPES",
    "grpo_step_loss",
    "ratio_statistics",
    "trajectory_loss_weights",
]

LOSS_TYPES = ("grpo", "bnpo", "dapo", "dr_grpo")
GROUP_LOSS_SCALES = ("mean", "sqrt")
IMPORTANCE_SAMPLING_LEVELS = ("step", "trajectory")


def trajectory_loss_weights(
    lengths: np.ndarray,
    loss_type: str,
    group_size: int,
    group_loss_scale: str = "mean",
    loss_constant: float | None = None,
) -> np.ndarray:
    """The loss weight of every step of each trajectory, such that the batch loss is ``sum_steps w * loss_step``.

    With ``M`` trajectories, ``N`` steps and ``L_i`` the length of trajectory ``i``: ``"grpo"``:
    ``1 / (M L_i)``; ``"bnpo"``/``"dapo"``: ``1 / N``; ``"dr_grpo"``: ``1 / (M C)`` with ``C = loss_constant``.
    ``group_loss_scale="sqrt"`` multiplies by ``sqrt(G)`` (a group's summed loss is divided by ``sqrt(G)``
    instead of ``G``).

    :param lengths: ``(M,)`` trajectory lengths.
    :return: ``(M,)`` weight of each step of each trajectory.
    """
    lengths = np.asarray(lengths, dtype=np.float64)
    n_trajectories = len(lengths)
    if n_trajectories == 0:
        return np.zeros(0)
    if loss_type == "grpo":
        weights = 1.0 / (n_trajectories * lengths)
    elif loss_type in ("bnpo", "dapo"):
        weights = np.full(n_trajectories, 1.0 / lengths.sum())
    elif loss_type == "dr_grpo":
        if loss_constant is None or not loss_constant > 0:
            raise ValueError(f"loss_type='dr_grpo' needs a positive loss_constant, got {loss_constant!r}")
        weights = np.full(n_trajectories, 1.0 / (n_trajectories * loss_constant))
    else:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if group_loss_scale == "sqrt":
        weights *= np.sqrt(group_size)
    return weights


def grpo_step_loss(
    log_prob: th.Tensor,
    old_log_prob: th.Tensor,
    advantages: th.Tensor,
    eps_low: float,
    eps_high: float,
    beta: float = 0.0,
    ref_log_prob: th.Tensor | None = None,
    trajectory: th.Tensor | None = None,
    n_trajectories: int = 0,
) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor, th.Tensor | None]:
    """GRPO's per-step loss ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) + beta * KL_k3(pi_theta || pi_ref)``.

    :param log_prob: ``(m,)`` log pi_theta(a_t | s_t) (differentiable).
    :param old_log_prob: ``(m,)`` log-probabilities under the behaviour policy.
    :param advantages: ``(m,)``.
    :param ref_log_prob: ``(m,)`` log-probabilities under the reference policy (``None``: no KL term).
    :param trajectory: ``(m,)`` trajectory index of each step for trajectory-level ratios
        ``r_i = exp(mean_t log r_t)`` (GSPO); ``None``: one ratio per step.
    :return: ``(per_step_loss, surrogate, ratio, log_ratio, kl_ref)``, each ``(m,)`` (``kl_ref`` ``None`` without
        a reference).
    """
    log_ratio = log_prob - old_log_prob
    if trajectory is not None:
        counts = trajectory_sums(th.ones_like(log_ratio), trajectory, n_trajectories)  # exact: integers below 2**24
        sums = trajectory_sums(log_ratio, trajectory, n_trajectories)  # reproducible on CUDA too
        ratio = th.exp(sums / counts.clamp_min(1.0))[trajectory]
    else:
        ratio = th.exp(log_ratio)
    surrogate = th.min(advantages * ratio, advantages * th.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high))
    per_step = -surrogate
    kl_ref = None
    if ref_log_prob is not None:
        # k3 estimator of KL(pi_theta || pi_ref): r - log r - 1 with r = pi_ref / pi_theta.
        kl_ref = kl_estimate(ref_log_prob - log_prob, "k3")
        per_step = per_step + beta * kl_ref
    return per_step, surrogate, ratio, log_ratio, kl_ref


def ratio_statistics(
    ratio: th.Tensor, advantages: th.Tensor, eps_low: float, eps_high: float
) -> tuple[float, float, float, float]:
    """What the clipped surrogate did with a minibatch's probability ratios, as TRL and verl log it.

    :param ratio: ``(m,)`` probability ratios ``pi / pi_old`` (per step, or the trajectory's ratio on each step).
    :param advantages: ``(m,)``.
    :return: ``(clip_fraction, clip_fraction_low, clip_fraction_high, ess)``: the share of steps whose ratio lies
        outside ``[1 - eps_low, 1 + eps_high]``; the share clipped from below where the advantage is negative and
        from above where it is positive (the clipped terms that stop a gradient, TRL's ``clip_ratio/low_mean`` and
        ``clip_ratio/high_mean``); and the effective sample size of the ratios as importance weights, normalised to
        ``(0, 1]``: ``(sum r)^2 / (m sum r^2)``, 1 when every ratio is equal.
    """
    low = ratio < 1.0 - eps_low
    high = ratio > 1.0 + eps_high
    n = max(ratio.numel(), 1)
    ess = float(ratio.sum() ** 2 / (n * (ratio**2).sum().clamp_min(1e-12)))
    return (
        float((low | high).float().mean()),
        float((low & (advantages < 0)).float().mean()),
        float((high & (advantages > 0)).float().mean()),
        ess,
    )
