"""A minimal sb3_grpo plugin: one advantage estimator, one reward function and one policy loss (registered in
``hooks.py``)."""

import numpy as np
import torch as th

from sb3_grpo import (
    AdvantageEstimator,
    AdvantageInputs,
    AdvantageOutputs,
    PolicyLoss,
    PolicyLossInputs,
    PolicyLossOutputs,
    Trajectory,
)


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


class CappedRatio(PolicyLoss):
    """``-min(r_t, cap) A_t`` per step: the importance-weighted policy gradient with the ratio capped from above and no
    lower clip (a one-sided trust region). ``cap`` comes from GRPO's ``policy_loss_kwargs``."""

    def __init__(self, cap: float = 2.0):
        if not cap > 1:
            raise ValueError(f"example_capped_ratio: cap must be > 1, got {cap!r}")
        self.cap = float(cap)

    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        ratio = th.exp(inputs.log_prob - inputs.old_log_prob)
        per_step = -th.clamp(ratio, max=self.cap) * inputs.advantages
        capped = float((ratio > self.cap).float().mean())
        return PolicyLossOutputs(per_step=per_step, ratio=ratio, stats={"example_capped_fraction": capped})
