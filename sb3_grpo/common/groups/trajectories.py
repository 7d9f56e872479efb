"""
A group rollout sorted into scored trajectories: :func:`score_rollout` turns the time-major steps of a
:class:`~sb3_grpo.common.groups.collector.Rollout` into whole trajectories (flat per step, trajectory by trajectory),
scores them with the reward functions and keeps what each algorithm builds its batch from (GRPO: advantages;
OnlineDPO: preference pairs). :func:`rollout_stats` gives the rollout's logged statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sb3_grpo.common.advantages import group_index, grouped_mean_std
from sb3_grpo.common.groups.collector import Rollout
from sb3_grpo.common.reward_scoring import RewardCombiner, Trajectory

__all__ = ["ScoredRollout", "rollout_stats", "score_rollout"]


@dataclass
class ScoredRollout:
    """The steps of one rollout as whole trajectories, with their scores.

    Per-step arrays are flat, trajectory by trajectory, each trajectory's steps in time order.

    :param observations: ``(N, *obs_shape)`` (a dict of arrays for Dict spaces).
    :param actions: ``(N, ...)``.
    :param log_prob: ``(N,)`` log-probabilities under the behaviour policy.
    :param counts: ``(M,)`` steps of each trajectory.
    :param group_ids: ``(M,)`` group of each trajectory within the rollout.
    :param trajectories: the :class:`~sb3_grpo.common.reward_scoring.Trajectory` objects the reward functions saw.
    :param outcomes: ``(M,)`` combined outcome reward (score) of each trajectory.
    :param step_rewards: one ``(L_i,)`` array of combined per-step rewards per trajectory.
    :param streams: each reward function's weighted per-step rewards (see ``RewardCombiner.score``).
    :param n_env_steps: every env step the rollout took (idle slots included).
    :param n_groups: the groups of the rollout.
    """

    observations: Any
    actions: np.ndarray
    log_prob: np.ndarray
    counts: np.ndarray
    group_ids: np.ndarray
    trajectories: list[Trajectory]
    outcomes: np.ndarray
    step_rewards: list[np.ndarray]
    streams: list[list[np.ndarray]]
    n_env_steps: int
    n_groups: int

    @property
    def n_steps(self) -> int:
        """The steps of the trajectories (those that enter the batch)."""
        return int(self.counts.sum())

    @property
    def starts(self) -> np.ndarray:
        """``(M,)`` where each trajectory's steps start in the per-step arrays."""
        return np.cumsum(np.r_[0, self.counts])[:-1].astype(np.int64)

    def per_trajectory(self, values: np.ndarray) -> list[np.ndarray]:
        """``values`` of the steps (``(N, ...)``, flat as the per-step arrays), one array per trajectory."""
        return np.split(np.asarray(values), self.starts[1:]) if len(self.counts) else []


def score_rollout(rollout: Rollout, reward_combiner: RewardCombiner, gamma: float, group_size: int) -> ScoredRollout:
    """Sort the recorded steps of ``rollout`` into whole trajectories and score them with ``reward_combiner``.

    :param gamma: the discount that reward functions see in ``Trajectory.gamma``.
    :param group_size: members per group (a trajectory's member is its id modulo ``group_size``).
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
    return ScoredRollout(
        observations=observations,
        actions=actions,
        log_prob=log_prob,
        counts=counts,
        group_ids=group_ids,
        trajectories=trajectories,
        outcomes=outcomes,
        step_rewards=step_rewards,
        streams=streams,
        n_env_steps=record.n_env_steps,
        n_groups=rollout.n_groups,
    )


def rollout_stats(
    scored: ScoredRollout, sampled_outcomes: np.ndarray | None = None, sampled_group_ids: np.ndarray | None = None
) -> dict[str, float]:
    """The rollout's statistics: ``rollout/used_step_fraction``, ``rollout/n_groups``, ``rollout/n_trajectories``,
    ``rollout/trajectory_len_mean``, ``rollout/outcome_reward_mean``, ``train/group_reward_std`` and
    ``train/zero_std_group_fraction``.

    :param scored: the batch.
    :param sampled_outcomes: with dynamic sampling, the scores of every trajectory sampled (dropped groups too), and
    :param sampled_group_ids: their groups: ``rollout/outcome_reward_mean`` and ``train/zero_std_group_fraction``
        then describe what the policy did, the other entries the batch. ``None``: the batch is everything sampled.
    """
    outcomes = scored.outcomes if sampled_outcomes is None else sampled_outcomes
    group_ids = scored.group_ids if sampled_group_ids is None else sampled_group_ids
    batch_inverse, batch_groups, _ = group_index(scored.group_ids)
    _, std, spread = grouped_mean_std(scored.outcomes, batch_inverse, batch_groups)
    if sampled_outcomes is not None:  # the zero-spread fraction of everything sampled, not of the batch
        inverse, n_group, _ = group_index(group_ids)
        _, _, spread = grouped_mean_std(outcomes, inverse, n_group)
    empty = len(scored.counts) == 0
    return {
        "rollout/used_step_fraction": scored.n_steps / max(scored.n_env_steps, 1),
        "rollout/n_groups": scored.n_groups,
        "rollout/n_trajectories": len(scored.counts),
        "rollout/trajectory_len_mean": float("nan") if empty else float(scored.counts.astype(np.float64).mean()),
        "rollout/outcome_reward_mean": float(np.mean(outcomes)),
        "train/group_reward_std": float("nan") if empty else float(np.mean(std)),
        "train/zero_std_group_fraction": float(np.mean(spread == 0.0)),
    }
