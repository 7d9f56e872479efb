"""
Dynamic sampling (DAPO, Yu et al. 2025): keep only the groups that carry a learning signal.

A group whose members all got the same score has no signal: its group-relative advantages are all zero (GRPO) and it
holds no strict preference pair (OnlineDPO). With ``dynamic_sampling=True`` a rollout drops such groups and samples
further rounds of groups until the informative groups fill the rollout (``groups_per_rollout`` informative groups, or
``n_steps * n_envs`` steps of informative groups), for at most ``max_sampling_rounds`` rounds; then it trains on
what it has. Every env step counts in ``num_timesteps``, dropped groups' included. This module holds the pieces:
which trajectories belong to informative groups, the selection and the concatenation of scored rounds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sb3_grpo.common.advantages import group_index, grouped_mean_std
from sb3_grpo.common.groups.trajectories import ScoredRollout

__all__ = ["concatenate_rounds", "informative_trajectories", "select_trajectories"]


def informative_trajectories(group_ids: np.ndarray, outcomes: np.ndarray) -> np.ndarray:
    """``(M,)`` bool: whether each trajectory's group holds two different scores (all equal, exactly: no signal)."""
    if len(outcomes) == 0:
        return np.zeros(0, dtype=bool)
    inverse, n_groups, _ = group_index(group_ids)
    _, _, spread = grouped_mean_std(outcomes, inverse, n_groups)
    return spread[inverse] > 0


def _take(value: Any, index: np.ndarray) -> Any:
    if isinstance(value, dict):
        return {key: v[index] for key, v in value.items()}
    return value[index]


def select_trajectories(scored: ScoredRollout, keep: np.ndarray) -> ScoredRollout:
    """The trajectories of ``scored`` where ``keep`` (``(M,)`` bool) is True, with their steps."""
    keep = np.asarray(keep, dtype=bool)
    steps = np.repeat(keep, scored.counts)
    kept = np.flatnonzero(keep)
    return ScoredRollout(
        observations=_take(scored.observations, steps),
        actions=scored.actions[steps],
        log_prob=scored.log_prob[steps],
        counts=scored.counts[keep],
        group_ids=scored.group_ids[keep],
        trajectories=[scored.trajectories[i] for i in kept],
        outcomes=scored.outcomes[keep],
        step_rewards=[scored.step_rewards[i] for i in kept],
        streams=[[stream[i] for i in kept] for stream in scored.streams],
        n_env_steps=scored.n_env_steps,
        n_groups=len(np.unique(scored.group_ids[keep])),
    )


def concatenate_rounds(parts: list[ScoredRollout]) -> ScoredRollout:
    """One scored rollout of the rounds ``parts`` (group ids must already differ between rounds)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    if isinstance(first.observations, dict):
        observations: Any = {key: np.concatenate([p.observations[key] for p in parts]) for key in first.observations}
    else:
        observations = np.concatenate([p.observations for p in parts])
    group_ids = np.concatenate([p.group_ids for p in parts])
    return ScoredRollout(
        observations=observations,
        actions=np.concatenate([p.actions for p in parts]),
        log_prob=np.concatenate([p.log_prob for p in parts]),
        counts=np.concatenate([p.counts for p in parts]),
        group_ids=group_ids,
        trajectories=[t for p in parts for t in p.trajectories],
        outcomes=np.concatenate([p.outcomes for p in parts]),
        step_rewards=[r for p in parts for r in p.step_rewards],
        streams=[[r for p in parts for r in p.streams[k]] for k in range(len(first.streams))],
        n_env_steps=sum(p.n_env_steps for p in parts),
        n_groups=len(np.unique(group_ids)),
    )
