"""
GRPO's training batch from one rollout: :func:`build_batch` sorts the recorded steps into whole trajectories,
scores them with the reward functions, computes advantages with the estimator, weighs every step for the loss and
fills the :class:`~sb3_grpo.grpo.buffers.GroupRolloutBuffer`, with the rollout's statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sb3_grpo.common.advantages import AdvantageInputs, group_index, grouped_mean_std, run_estimator
from sb3_grpo.common.reward_scoring import RewardCombiner, Trajectory
from sb3_grpo.grpo.buffers import GroupRolloutBuffer
from sb3_grpo.grpo.loss import trajectory_loss_weights
from sb3_grpo.grpo.rollout import Rollout

__all__ = ["build_batch"]


def build_batch(
    rollout: Rollout,
    buffer: GroupRolloutBuffer,
    *,
    reward_combiner: RewardCombiner,
    estimator: Any,
    gamma: float,
    group_size: int,
    reward_gammas: Sequence[float] | None,
    loss_type: str,
    loss_constant: float | None,
    group_loss_scale: str,
) -> float | None:
    """Fill ``buffer`` with the batch of ``rollout`` and set ``buffer.stats``: ``rollout/used_step_fraction``,
    ``rollout/n_groups``, ``rollout/n_trajectories``, ``rollout/trajectory_len_mean``,
    ``rollout/outcome_reward_mean``, ``train/group_reward_std`` and ``train/zero_std_group_fraction``.

    The arguments after ``buffer`` are GRPO's (see :class:`~sb3_grpo.grpo.GRPO`); ``estimator`` is the advantage
    estimator instance.

    :param loss_constant: the constant of ``loss_type="dr_grpo"``; ``None``: the longest trajectory of this batch.
    :return: the ``loss_constant`` used (``None`` unless ``loss_type="dr_grpo"``).
    """
    record = rollout.record
    steps_obs, steps_infos = record.obs, record.infos
    n_envs = record.trajectory[0].shape[0]
    traj = np.stack(record.trajectory).reshape(-1)  # time-major (t, slot)
    used = np.flatnonzero(traj >= 0)
    order = used[np.argsort(traj[used], kind="stable")]  # trajectory by trajectory, steps in time order
    ids, starts, counts = np.unique(traj[order], return_index=True, return_counts=True)

    def gather(steps: list[np.ndarray]) -> np.ndarray:
        stacked = np.stack(steps)
        return stacked.reshape(-1, *stacked.shape[2:])[order]

    if isinstance(steps_obs[0], dict):
        observations: Any = {key: gather([o[key] for o in steps_obs]) for key in steps_obs[0]}
    else:
        observations = gather(steps_obs)
    actions = gather(record.actions)
    log_prob = gather(record.log_prob)
    rewards = gather(record.rewards)
    group_ids = np.array([rollout.group_of[int(i)] for i in ids], dtype=np.int64)

    trajectories = []
    infos_flat = [steps_infos[i // n_envs][i % n_envs] for i in order]
    for index, (trajectory, start, count) in enumerate(zip(ids, starts, counts, strict=True)):
        sl = slice(start, start + count)
        terminated, truncated = rollout.ends[int(trajectory)]
        trajectories.append(
            Trajectory(
                observations={k: v[sl] for k, v in observations.items()}
                if isinstance(observations, dict)
                else observations[sl],
                actions=actions[sl],
                rewards=rewards[sl],
                infos=infos_flat[sl],
                terminated=terminated,
                truncated=truncated,
                gamma=gamma,
                group_id=int(group_ids[index]),
                member=int(trajectory) % group_size,
                index=index,
            )
        )
    outcomes, step_rewards, _, streams = reward_combiner.score(trajectories)
    inputs = AdvantageInputs.from_trajectories(
        step_rewards,
        gamma,
        outcome_rewards=outcomes,
        group_ids=group_ids,
        terminated=np.array([t.terminated for t in trajectories]),
        reward_streams=None if reward_gammas is None else list(zip(streams, reward_gammas, strict=True)),
    )
    outputs = run_estimator(estimator, inputs)
    advantages = np.asarray(outputs.advantages).T[inputs.valid.T]

    # Per-step loss weights (see GroupRolloutBuffer).
    keep = np.ones(len(trajectories), dtype=bool)
    lengths = counts.astype(np.float64)
    if loss_type == "dr_grpo" and loss_constant is None:
        loss_constant = float(lengths.max())
    per_trajectory = trajectory_loss_weights(lengths, keep, loss_type, group_size, group_loss_scale, loss_constant)
    weights = np.repeat(per_trajectory, counts)
    buffer.fill(observations, actions, log_prob, advantages, weights, np.repeat(np.arange(len(ids)), counts))
    buffer.group_ids = group_ids  # per trajectory, for inspection

    inverse, n_group, _ = group_index(group_ids)
    _, std, spread = grouped_mean_std(outcomes, inverse, n_group)
    buffer.stats = {
        "rollout/used_step_fraction": len(order) / max(record.n_env_steps, 1),
        "rollout/n_groups": rollout.n_groups,
        "rollout/n_trajectories": len(ids),
        "rollout/trajectory_len_mean": float(lengths.mean()),
        "rollout/outcome_reward_mean": float(np.mean(outcomes)),
        "train/group_reward_std": float(np.mean(std)),
        "train/zero_std_group_fraction": float(np.mean(spread == 0.0)),
    }
    return loss_constant
