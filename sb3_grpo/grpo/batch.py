"""
GRPO's training batch from one scored rollout (:class:`~sb3_grpo.common.groups.trajectories.ScoredRollout`):
:func:`build_batch` computes advantages with the estimator, weighs every step for the loss and fills the
:class:`~sb3_grpo.common.groups.buffers.GroupRolloutBuffer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sb3_grpo.common.advantages import AdvantageInputs, run_estimator
from sb3_grpo.common.groups.buffers import GroupRolloutBuffer
from sb3_grpo.common.groups.trajectories import ScoredRollout
from sb3_grpo.grpo.loss import trajectory_loss_weights

__all__ = ["build_batch"]


def build_batch(
    scored: ScoredRollout,
    buffer: GroupRolloutBuffer,
    *,
    estimator: Any,
    gamma: float,
    group_size: int,
    reward_gammas: Sequence[float] | None,
    loss_type: str,
    loss_constant: float | None,
    group_loss_scale: str,
    first_steps_only: bool = False,
) -> float | None:
    """Fill ``buffer`` with the batch of ``scored``.

    The arguments after ``buffer`` are GRPO's (see :class:`~sb3_grpo.grpo.GRPO`); ``estimator`` is the advantage
    estimator instance.

    :param loss_constant: the constant of ``loss_type="dr_grpo"``; ``None``: the longest trajectory of this batch.
    :param first_steps_only: the batch holds each trajectory's first step only (``branch_common_noise``: a segment
        trains on the step whose actions its members compare), each weighted as a trajectory of one step.
    :return: the ``loss_constant`` used (``None`` unless ``loss_type="dr_grpo"``).
    """
    trajectories, counts, group_ids = scored.trajectories, scored.counts, scored.group_ids
    inputs = AdvantageInputs.from_trajectories(
        scored.step_rewards,
        gamma,
        outcome_rewards=scored.outcomes,
        group_ids=group_ids,
        terminated=np.array([t.terminated for t in trajectories]),
        reward_streams=None if reward_gammas is None else list(zip(scored.streams, reward_gammas, strict=True)),
    )
    outputs = run_estimator(estimator, inputs)
    advantages = np.asarray(outputs.advantages).T[inputs.valid.T]
    observations, actions, log_prob = scored.observations, scored.actions, scored.log_prob
    if first_steps_only:
        first = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
        advantages, actions, log_prob = advantages[first], actions[first], log_prob[first]
        if isinstance(observations, dict):
            observations = {key: value[first] for key, value in observations.items()}
        else:
            observations = observations[first]
        counts = np.ones_like(counts)

    # Per-step loss weights (see GroupRolloutBuffer).
    lengths = counts.astype(np.float64)
    if loss_type == "dr_grpo" and loss_constant is None:
        loss_constant = float(lengths.max())
    per_trajectory = trajectory_loss_weights(lengths, loss_type, group_size, group_loss_scale, loss_constant)
    weights = np.repeat(per_trajectory, counts)
    buffer.fill(observations, actions, log_prob, advantages, weights, np.repeat(np.arange(len(counts)), counts))
    buffer.group_ids = group_ids  # per trajectory, for inspection
    return loss_constant
