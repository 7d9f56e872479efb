"""Rank-based group advantages: each trajectory's centred rank within its group."""

from __future__ import annotations

import numpy as np

from sb3_grpo import AdvantageEstimator, AdvantageInputs, AdvantageOutputs


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks ``1..n`` of ``values``, tied values sharing their average rank: ``(3, 10, 3, 0) -> (2.5, 4, 2.5, 1)``."""
    _, inverse, counts = np.unique(np.asarray(values), return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - counts + (counts + 1) / 2.0)[inverse.reshape(-1)]


class GroupRank(AdvantageEstimator):
    """
    ``A_i = (rank_i - mean rank) / ((G - 1) / 2)``: the centred rank of a trajectory's outcome within its group of
    ``G``, in ``[-1, 1]``. Ties share their average rank; a group whose outcomes are all equal (or a group of one)
    gets exactly zero. Invariant to any increasing transformation of the rewards, so one outlier or a badly scaled
    reward function cannot dominate the update.

    :param scale: ``"range"`` (default: divide by ``(G - 1) / 2``, so the best member gets +1 and the worst -1),
        ``"std"`` (divide by the standard deviation of the group's centred ranks) or ``"none"`` (raw centred ranks).
    """

    requires = frozenset({"outcome_rewards", "group_ids"})

    def __init__(self, scale: str = "range"):
        if scale not in ("range", "std", "none"):
            raise ValueError(f"group_rank: scale must be 'range', 'std' or 'none', got {scale!r}")
        self.scale = scale

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        rewards = np.asarray(inputs.outcome_rewards, dtype=np.float64)
        group_ids = np.asarray(inputs.group_ids)
        advantages = np.zeros_like(rewards)
        for group in np.unique(group_ids):
            members = np.flatnonzero(group_ids == group)
            if len(members) < 2:
                continue
            centred = average_ranks(rewards[members]) - (len(members) + 1) / 2.0
            if self.scale == "range":
                centred = centred / ((len(members) - 1) / 2.0)
            elif self.scale == "std":
                std = centred.std()
                centred = centred / std if std > 0 else centred
            advantages[members] = centred
        return AdvantageOutputs(advantages=inputs.broadcast(advantages))
