"""GRPO's loss pieces that do not depend on the policy loss: the loss weights of the ``loss_type`` aggregations, the
mask of ``top_entropy_quantile`` and the clip diagnostics. The policy losses themselves are plugins
(:mod:`sb3_grpo.common.policy_losses`, :mod:`sb3_grpo.default_plugins.policy_losses`)."""

from __future__ import annotations

import numpy as np
import torch as th

__all__ = [
    "GROUP_LOSS_SCALES",
    "IMPORTANCE_SAMPLING_LEVELS",
    "LOSS_TYPES",
    "entropy_mask",
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


def entropy_mask(entropy: th.Tensor, quantile: float) -> th.Tensor:
    """``(m,)`` 1.0 on the steps whose entropy is at least the ``1 - quantile`` quantile of the minibatch's, else 0.0
    (TRL's ``get_high_entropy_mask``: ``top_entropy_quantile=0.2`` keeps the fifth of the steps with the highest
    entropy; ties at the threshold are kept). Detached.

    :param entropy: ``(m,)`` the policy's entropy at each step.
    :param quantile: the share of steps to keep, in ``(0, 1]``.
    """
    entropy = entropy.detach()
    if entropy.numel() == 0:
        return th.zeros_like(entropy)
    threshold = th.quantile(entropy.float(), 1.0 - quantile)
    return (entropy >= threshold.to(entropy.dtype)).to(entropy.dtype)


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
