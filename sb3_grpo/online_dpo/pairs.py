"""OnlineDPO's preference pairs: within each group, trajectories ordered by their scores (reward functions)."""

from __future__ import annotations

import numpy as np

__all__ = ["PAIRINGS", "preference_pairs"]

#: The values of ``pairs``.
PAIRINGS = ("best_worst", "all")


def preference_pairs(group_ids: np.ndarray, scores: np.ndarray, pairs: str = "best_worst") -> np.ndarray:
    """The preference pairs ``(winner, loser)`` of a batch, as indices of its trajectories.

    Only members of the same group are compared (they started from the same state), and only where one scored
    strictly higher: ties give no pair, and a group whose members all scored the same gives none.

    :param group_ids: ``(M,)`` the group of each trajectory.
    :param scores: ``(M,)`` the score of each trajectory.
    :param pairs: ``"best_worst"``: one pair per group, its best against its worst member (among members with the
        same best or worst score, the first in batch order: the members of a group are exchangeable samples);
        ``"all"``: every pair of members with different scores, the higher scoring one first.
    :return: ``(P, 2)`` int64, groups in order of first appearance, pairs within a group in batch order.
    """
    if pairs not in PAIRINGS:
        raise ValueError(f"pairs must be one of {PAIRINGS}, got {pairs!r}")
    group_ids = np.asarray(group_ids)
    scores = np.asarray(scores, dtype=np.float64)
    _, first = np.unique(group_ids, return_index=True)
    found: list[tuple[int, int]] = []
    for group in group_ids[np.sort(first)]:
        members = np.flatnonzero(group_ids == group)
        values = scores[members]
        if pairs == "best_worst":
            best, worst = members[np.argmax(values)], members[np.argmin(values)]
            if scores[best] > scores[worst]:
                found.append((int(best), int(worst)))
            continue
        for i in members:
            for j in members:
                if scores[i] > scores[j]:
                    found.append((int(i), int(j)))
    return np.array(found, dtype=np.int64).reshape(-1, 2)
