"""REINFORCE's built-in baselines: the reward-to-go of every step minus one number per batch.

They differ from the registered ``reinforce_baseline`` estimator, which REINFORCE accepts too: that one weighs every
step of an episode by the episode's whole (undiscounted) return minus a moving average of past episodes' mean
return; these weigh step ``t`` by its discounted reward-to-go ``G_t`` minus a baseline over the steps' ``G_t``.
"""

from __future__ import annotations

import numpy as np

from sb3_grpo.common.advantages import AdvantageEstimator, AdvantageInputs, AdvantageOutputs, reward_to_go

__all__ = ["BASELINES", "RewardToGoBaseline"]

#: The built-in baselines ``REINFORCE(baseline=...)`` accepts (any registered estimator that fits is accepted too).
BASELINES = ("moving_average", "batch_mean", "none")


class RewardToGoBaseline(AdvantageEstimator):
    """
    REINFORCE's built-in advantages: the reward-to-go of every step minus one baseline ``b`` per batch.

    - ``"moving_average"``: ``b_k = b_{k-1}`` for batch ``k``, then ``b_k <- decay * b_{k-1} + (1 - decay) *
      mean_k(G)`` (the first batch uses its own mean). The value is part of the estimator, saved with the model.
    - ``"batch_mean"``: the mean reward-to-go over the steps of this batch.
    - ``"none"``: ``b = 0`` (plain REINFORCE).

    :param baseline: one of :data:`BASELINES`.
    :param decay: weight of the old value in the moving average.
    """

    requires = frozenset({"step_rewards"})

    def __init__(self, baseline: str = "moving_average", decay: float = 0.9):
        if baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
        self.baseline = baseline
        self.decay = float(decay)
        #: The moving-average baseline the next batch uses (``None`` before the first batch).
        self.baseline_value: float | None = None

    def compute_baseline(self, returns: np.ndarray) -> float:
        """The baseline ``b`` for one batch of reward-to-go values (and, for the moving average, its update).

        :param returns: the batch's reward-to-go, one per step.
        """
        batch_mean = float(np.mean(returns))
        if self.baseline == "none":
            return 0.0
        if self.baseline == "batch_mean":
            return batch_mean
        baseline = batch_mean if self.baseline_value is None else self.baseline_value
        self.baseline_value = self.decay * baseline + (1.0 - self.decay) * batch_mean
        return baseline

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        returns = reward_to_go(inputs.rewards, inputs.gamma, inputs.valid)
        baseline = self.compute_baseline(returns[inputs.valid])
        return AdvantageOutputs(advantages=np.where(inputs.valid, returns - baseline, 0.0), returns=returns)
