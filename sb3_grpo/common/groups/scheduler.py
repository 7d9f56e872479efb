"""
Which (group, member) trajectory each VecEnv slot runs next, and with which seed.

A rollout opens groups one after another; each group has ``group_size`` members that start from the same
state (the same reset seed). A slot that starts a trajectory immediately reserves its next one, because SB3's
VecEnvs reset a slot inside ``step`` the moment its episode ends: the seed must already be in place.
Groups stop opening once the rollout has recorded enough steps (or opened ``groups_per_rollout`` groups); every
member of an opened group is always run, so a batch holds whole groups only. Slots with nothing left to do
idle until the last trajectories finish (those steps are the only ones not used for training; the fraction
used is logged as ``rollout/used_step_fraction``).

Group seeds come from ``SeedSequence([seed_root, group_counter])``: reproducible from the model's seed, different
for every group, and independent of the number of env slots.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Assignment", "GroupScheduler", "group_seed"]


def group_seed(seed_root: int, group_counter: int) -> int:
    """The reset seed shared by all members of global group number ``group_counter``."""
    return int(np.random.SeedSequence([int(seed_root), int(group_counter)]).generate_state(1, dtype=np.uint32)[0])


@dataclass(frozen=True)
class Assignment:
    """One trajectory to run: its id in the rollout (``group * group_size + member``), group, member and seed."""

    trajectory: int
    group: int
    member: int
    seed: int


class GroupScheduler:
    """
    Hands out trajectories group by group for one rollout.

    :param group_size: members per group (G).
    :param seed_root: root of the group seeds (derived from the model's seed).
    :param first_group: global counter of the first group of this rollout (groups are numbered across rollouts,
        so every group of a training run has its own seed).
    :param target_steps: stop opening groups once this many steps are recorded (``None``: use ``max_groups``).
    :param max_groups: open exactly this many groups (``None``: use ``target_steps``).
    """

    def __init__(
        self,
        group_size: int,
        seed_root: int,
        first_group: int,
        target_steps: int | None = None,
        max_groups: int | None = None,
    ):
        if (target_steps is None) == (max_groups is None):
            raise ValueError("GroupScheduler needs exactly one of target_steps and max_groups.")
        self.group_size = group_size
        self.seed_root = seed_root
        self.first_group = first_group
        self.target_steps = target_steps
        self.max_groups = max_groups
        self.n_groups = 0  # groups opened so far
        self._next_member = group_size  # no open group yet
        self._seed = 0

    def next(self, recorded_steps: int) -> Assignment | None:
        """The next trajectory to run, or ``None`` when the rollout has all it needs.

        :param recorded_steps: steps recorded so far in this rollout (decides whether a new group opens).
        """
        if self._next_member >= self.group_size:
            if self.max_groups is not None:
                if self.n_groups >= self.max_groups:
                    return None
            elif recorded_steps >= self.target_steps:  # type: ignore[operator]
                return None
            self._seed = group_seed(self.seed_root, self.first_group + self.n_groups)
            self.n_groups += 1
            self._next_member = 0
        group, member = self.n_groups - 1, self._next_member
        self._next_member += 1
        return Assignment(group * self.group_size + member, group, member, self._seed)
