"""OnlineDPO's objective: the log-ratio margin of a preference pair and the DPO / IPO losses on it.

For a pair (winner ``w``, loser ``l``) of trajectories from one start state, with ``log pi(tau)`` the sum of the
policy's per-step log-probabilities of the trajectory's actions:

    h = [log pi(tau_w) - log pi_ref(tau_w)] - [log pi(tau_l) - log pi_ref(tau_l)]

The environment's start-state and transition probabilities appear in ``log P(tau)`` of both policies alike, so they
cancel in each ratio: only the policy's log-probabilities are needed. ``loss_type="sigmoid"`` (DPO, Rafailov et al.
2023): ``-log sigmoid(beta * h)``; ``"ipo"`` (IPO, Azar et al. 2023): ``(h - 1 / (2 beta))^2``.
"""

from __future__ import annotations

import torch as th
import torch.nn.functional as F

from sb3_grpo.common.groups.buffers import trajectory_sums

__all__ = ["LOSS_TYPES", "pair_margins", "preference_loss", "trajectory_log_probs"]

LOSS_TYPES = ("sigmoid", "ipo")


def trajectory_log_probs(step_log_prob: th.Tensor, trajectory: th.Tensor, n_trajectories: int) -> th.Tensor:
    """``(n_trajectories,)``: ``log pi(tau)``, the sum of the per-step log-probabilities of each trajectory.

    :param step_log_prob: ``(m,)`` log-probability of each step's action.
    :param trajectory: ``(m,)`` the trajectory (``0..n_trajectories-1``) of each step.
    """
    return trajectory_sums(step_log_prob, trajectory, n_trajectories)  # reproducible on CUDA, unlike index_add


def pair_margins(log_prob: th.Tensor, ref_log_prob: th.Tensor, winners: th.Tensor, losers: th.Tensor) -> th.Tensor:
    """``(P,)``: ``h`` of each pair, from per-trajectory log-probabilities under the policy and the reference.

    :param log_prob: ``(M,)`` ``log pi(tau)`` (differentiable).
    :param ref_log_prob: ``(M,)`` ``log pi_ref(tau)``.
    :param winners: ``(P,)`` index of each pair's preferred trajectory; ``losers`` the other.
    """
    ratio = log_prob - ref_log_prob
    return ratio[winners] - ratio[losers]


def preference_loss(margins: th.Tensor, beta: float, loss_type: str = "sigmoid") -> th.Tensor:
    """``(P,)``: the loss of each pair, ``-log sigmoid(beta * h)`` (``"sigmoid"``) or ``(h - 1/(2 beta))^2``
    (``"ipo"``)."""
    if loss_type == "sigmoid":
        return -F.logsigmoid(beta * margins)
    if loss_type == "ipo":
        return (margins - 1.0 / (2.0 * beta)) ** 2
    raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
