"""
Issue 10 experiment: a reward-history control variate on top of GRPO's per-step group baseline (HalfCheetah).

Members of a branching group start a segment from one state, then drift apart: at step t, member i's
reward-to-go minus the other members' mean also carries what its state owes to its earlier actions (a member
that got ahead runs faster for a while whatever it does now). That part can be predicted from the member's past
rewards alone, which do not depend on the action at t, so subtracting a fit of it leaves the gradient unbiased:
each advantage minus its least-squares fit, over the batch, on the member's reward excess over the other members
at each of the ``history`` previous steps, plus that excess summed since the segment began.

Registers ``exp_step_baseline_history`` in-process, then runs harness cells of a sweep that names it
(``grpo_hc_g8_h8.yml``: ``history`` 8). The estimator keeps the last batch's R^2 of the fit (``last_r2``); on
HalfCheetah seed 0 it was ~0.06 at the start and ~0.2-0.25 by 80k steps.

    python -m benchmarks.exp_history_baseline --algo grpo:hc_g8_h8 --seeds 0 1 2 3 4 5 6 7
"""

from __future__ import annotations

import numpy as np

from benchmarks import harness
from sb3_grpo import register_advantage_estimator
from sb3_grpo.common.advantages import AdvantageInputs, AdvantageOutputs, group_index
from sb3_grpo.default_plugins.advantage_estimators import GroupStepBaseline


def history_features(rewards: np.ndarray, valid: np.ndarray, group_ids: np.ndarray, history: int) -> np.ndarray:
    """``(horizon, columns, history + 1)``: the member's reward excess over the other members alive at the same step,
    at lags 1..history, then summed over every earlier step of the column (zero where there is none)."""
    inverse, n_groups, _ = group_index(group_ids)
    rewards = np.where(valid, rewards, 0.0)
    horizon, n_columns = rewards.shape
    sums = np.zeros((horizon, n_groups))
    counts = np.zeros((horizon, n_groups))
    for column in range(n_columns):
        sums[:, inverse[column]] += rewards[:, column]
        counts[:, inverse[column]] += valid[:, column]
    others = counts[:, inverse] - 1.0
    excess = np.where(valid & (others > 0), rewards - (sums[:, inverse] - rewards) / np.maximum(others, 1.0), 0.0)
    features = np.zeros((horizon, n_columns, history + 1))
    for lag in range(1, history + 1):
        features[lag:, :, lag - 1] = excess[:-lag]
    features[1:, :, history] = np.cumsum(excess, axis=0)[:-1]
    return features


class StepBaselineWithHistory(GroupStepBaseline):
    """``group_step_baseline`` (``scale`` applied last) with the reward-history control variate above."""

    def __init__(self, history: int = 8, scale: str = "batch", **kwargs):
        if scale not in ("batch", "none"):
            raise ValueError(f"exp_step_baseline_history: scale must be 'batch' or 'none', got {scale!r}")
        if int(history) < 0:
            raise ValueError(f"exp_step_baseline_history: history must be >= 0, got {history!r}")
        super().__init__(scale="none", **kwargs)  # the parent's unscaled advantages; the scale comes after the fit
        self.final_scale = scale
        self.history = int(history)
        self.last_r2 = float("nan")

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        advantages = super().compute(inputs).advantages
        valid = inputs.valid
        features = history_features(np.asarray(inputs.rewards, dtype=np.float64), valid, inputs.group_ids, self.history)
        fit = valid & (advantages != 0.0)
        x, y = features[fit], advantages[fit]
        if len(y) > features.shape[-1]:
            coef, *_ = np.linalg.lstsq(x, y, rcond=None)
            total = float(np.sum(y**2))
            self.last_r2 = 1.0 - float(np.sum((y - x @ coef) ** 2)) / total if total > 0 else float("nan")
            advantages = np.where(fit, advantages - features @ coef, advantages)
        if self.final_scale == "batch" and valid.any():
            advantages = advantages / (advantages[valid].std() + self.eps)
        return AdvantageOutputs(advantages=np.where(valid, advantages, 0.0))


def main(argv: list[str] | None = None) -> None:
    register_advantage_estimator("exp_step_baseline_history", StepBaselineWithHistory)
    harness.run_experiment_cells(__doc__, "grpo:hc_g8_h8", [0, 1, 2], argv)


if __name__ == "__main__":
    main()
