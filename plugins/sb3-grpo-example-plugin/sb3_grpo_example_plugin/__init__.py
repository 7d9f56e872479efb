"""A minimal sb3_grpo plugin: one advantage estimator and one reward function (registered in ``hooks.py``)."""

import numpy as np

from sb3_grpo import AdvantageEstimator, AdvantageInputs, AdvantageOutputs, Trajectory


class GroupMedian(AdvantageEstimator):
    """``R_i - median of the group's outcome rewards`` (robust to one outlier in the group)."""

    requires = frozenset({"outcome_rewards", "group_ids"})

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        rewards = np.asarray(inputs.outcome_rewards, dtype=np.float64)
        advantages = np.zeros_like(rewards)
        for group in np.unique(inputs.group_ids):
            members = np.flatnonzero(inputs.group_ids == group)
            advantages[members] = rewards[members] - np.median(rewards[members])
        return AdvantageOutputs(advantages=inputs.broadcast(advantages))


def episode_length(trajectory: Trajectory) -> float:
    """The number of steps the episode lasted."""
    return float(trajectory.length)
