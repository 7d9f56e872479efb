"""The issue-10 experiment benchmarks/exp_history_baseline.py: its features by hand, and its least-squares correction."""

import numpy as np

from benchmarks.exp_history_baseline import StepBaselineWithHistory, history_features
from sb3_grpo.common.advantages import AdvantageInputs
from sb3_grpo.default_plugins.advantage_estimators import GroupStepBaseline


def test_history_features_by_hand():
    # One group of three members over three steps; member 2 ends after step 1.
    rewards = np.array([[1.0, 2.0, 6.0], [3.0, 1.0, 2.0], [5.0, 7.0, 0.0]])
    valid = np.array([[True, True, True], [True, True, True], [True, True, False]])
    features = history_features(rewards, valid, np.zeros(3, dtype=int), history=2)
    # Excess over the other members alive at the same step:
    # t=0: 1-(2+6)/2=-3, 2-(1+6)/2=-1.5, 6-(1+2)/2=4.5; t=1: 3-1.5=1.5, 1-2.5=-1.5, 2-2=0; t=2: 5-7=-2, 7-5=2, 0.
    excess = np.array([[-3.0, -1.5, 4.5], [1.5, -1.5, 0.0], [-2.0, 2.0, 0.0]])
    assert np.allclose(features[0], 0.0)
    assert np.allclose(features[1, :, 0], excess[0]) and np.allclose(features[1, :, 1], 0.0)
    assert np.allclose(features[2, :, 0], excess[1]) and np.allclose(features[2, :, 1], excess[0])
    assert np.allclose(features[1, :, 2], excess[0]) and np.allclose(features[2, :, 2], excess[0] + excess[1])


def test_correction_removes_the_least_squares_fit_on_past_rewards():
    rng = np.random.default_rng(0)
    horizon, n_columns = 40, 16
    inputs = AdvantageInputs(
        rewards=rng.normal(size=(horizon, n_columns)),
        episode_starts=np.zeros((horizon, n_columns)),
        gamma=0.97,
        group_ids=np.repeat([0, 1], 8),
    )
    plain = GroupStepBaseline(scale="none").compute(inputs).advantages
    with_history = StepBaselineWithHistory(history=3, scale="none")
    corrected = with_history.compute(inputs).advantages
    features = history_features(inputs.rewards, np.ones((horizon, n_columns), bool), inputs.group_ids, 3)
    x = features.reshape(-1, 4)
    # Least squares: the residual is orthogonal to every feature, and it is what the plain baseline left minus the fit.
    assert np.allclose(x.T @ corrected.reshape(-1), 0.0, atol=1e-8)
    coef, *_ = np.linalg.lstsq(x, plain.reshape(-1), rcond=None)
    assert np.allclose(corrected, plain - features @ coef)
    assert 0.0 <= with_history.last_r2 < 1.0
    # At a segment's first step the members share one state and have no past: nothing to correct.
    assert np.allclose(corrected[0], plain[0])
