"""
GRPO's training batch from one scored rollout (:class:`~sb3_grpo.common.groups.trajectories.ScoredRollout`):
:func:`build_batch` computes advantages with the estimator, weighs every step for the loss and fills the
:class:`~sb3_grpo.common.groups.buffers.GroupRolloutBuffer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.utils import obs_as_tensor

from sb3_grpo.common.advantages import AdvantageInputs, run_estimator
from sb3_grpo.common.groups.buffers import GroupRolloutBuffer
from sb3_grpo.common.groups.trajectories import ScoredRollout
from sb3_grpo.grpo.loss import trajectory_loss_weights

__all__ = ["build_batch", "flat_observations", "score_norms"]


def flat_observations(observations: Any) -> np.ndarray:
    """``(N, D)`` float64: each step's observation flattened to numbers (a Dict observation's keys concatenated in
    sorted order), the ``observations`` of :class:`~sb3_grpo.common.advantages.AdvantageInputs`."""
    if isinstance(observations, dict):
        parts = [np.asarray(observations[key], dtype=np.float64) for key in sorted(observations)]
        return np.concatenate([part.reshape(len(part), -1) for part in parts], axis=1)
    observations = np.asarray(observations, dtype=np.float64)
    return observations.reshape(len(observations), -1)


def score_norms(policy: Any, observations: Any, actions: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """``(N,)`` the squared norm of the gradient of ``log pi(a | s)`` with respect to the logits of a categorical
    policy, ``1 - 2 pi(a | s) + sum_b pi(b | s)^2``, for every step (the ``score_norms`` of
    :class:`~sb3_grpo.common.advantages.AdvantageInputs`).

    :param policy: a policy with a categorical action distribution (Discrete action space).
    :param observations: ``(N, *obs_shape)`` (a dict of arrays for Dict spaces), as the policy saw them.
    :param actions: ``(N,)`` or ``(N, 1)`` the actions taken.
    :param chunk: steps per forward pass.

    Reference: verl, ``docs/algo/otb.md`` (the logit-gradient proxy): the gradient of ``log softmax(z)_a`` with
    respect to ``z`` is ``e_a - pi``, whose squared norm this is.
    """
    actions = np.asarray(actions).reshape(-1)
    parts = []
    with th.no_grad():
        for start in range(0, len(actions), chunk):
            part = slice(start, start + chunk)
            obs = {k: v[part] for k, v in observations.items()} if isinstance(observations, dict) else observations[part]
            probs = policy.get_distribution(obs_as_tensor(obs, policy.device)).distribution.probs  # type: ignore[arg-type]
            taken = th.as_tensor(actions[part], device=probs.device, dtype=th.long)
            chosen = probs.gather(1, taken[:, None]).squeeze(1)
            parts.append((1.0 - 2.0 * chosen + (probs**2).sum(dim=1)).double().cpu().numpy())
    return np.concatenate(parts) if parts else np.zeros(0)


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
    policy: Any = None,
) -> float | None:
    """Fill ``buffer`` with the batch of ``scored``.

    The arguments after ``buffer`` are GRPO's (see :class:`~sb3_grpo.grpo.GRPO`); ``estimator`` is the advantage
    estimator instance.

    :param loss_constant: the constant of ``loss_type="dr_grpo"``; ``None``: the longest trajectory of this batch.
    :param first_steps_only: the batch holds each trajectory's first step only (``branch_common_noise``: a segment
        trains on the step whose actions its members compare), each weighted as a trajectory of one step.
    :param policy: the policy that acted; used (by :func:`score_norms`) only for an estimator that needs
        ``score_norms``.
    :return: the ``loss_constant`` used (``None`` unless ``loss_type="dr_grpo"``).
    """
    trajectories, counts, group_ids = scored.trajectories, scored.counts, scored.group_ids
    norms = None
    if "score_norms" in set(getattr(estimator, "requires", ())):
        if policy is None:
            raise ValueError("build_batch: the estimator needs score_norms; pass the policy that acted.")
        norms = scored.per_trajectory(score_norms(policy, scored.observations, scored.actions))
    flat = None
    if "observations" in set(getattr(estimator, "requires", ())):
        flat = scored.per_trajectory(flat_observations(scored.observations))
    inputs = AdvantageInputs.from_trajectories(
        scored.step_rewards,
        gamma,
        outcome_rewards=scored.outcomes,
        group_ids=group_ids,
        terminated=np.array([t.terminated for t in trajectories]),
        reward_streams=None if reward_gammas is None else list(zip(scored.streams, reward_gammas, strict=True)),
        score_norms=norms,
        observations=flat,
    )
    outputs = run_estimator(estimator, inputs)
    advantages = np.asarray(outputs.advantages).T[inputs.valid.T]
    observations, actions, log_prob = scored.observations, scored.actions, scored.log_prob
    if first_steps_only:
        first = scored.starts
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
