"""The issue-10 diagnostic benchmarks/exp_baseline_variance.py: its baselines and squared advantages by hand."""

import numpy as np

from benchmarks.exp_baseline_variance import baselines, squared_advantages
from sb3_grpo.common.advantages import AdvantageInputs


def test_baselines_by_hand():
    returns = np.array([1.0, 2.0, 6.0])
    obs = np.array([[0.0], [1.0], [3.0]])  # distances: 0-1: 1, 0-2: 3, 1-2: 2; their median 2
    out = baselines(returns, obs, bandwidths=(1.0,))
    assert np.allclose(out["mean"], [4.0, 3.5, 1.5])
    assert np.allclose(out["nearest"], [2.0, 1.0, 2.0])  # member 2's nearest is member 1 (distance 2)
    w = lambda d: np.exp(-((d / 2.0) ** 2))  # noqa: E731
    expected = [
        (w(1) * 2.0 + w(3) * 6.0) / (w(1) + w(3)),
        (w(1) * 1.0 + w(2) * 6.0) / (w(1) + w(2)),
        (w(3) * 1.0 + w(2) * 2.0) / (w(3) + w(2)),
    ]
    assert np.allclose(out["kernel 1"], expected)


def test_kernel_falls_back_to_the_mean_when_every_weight_underflows():
    out = baselines(np.array([1.0, 2.0, 9.0]), np.array([[0.0], [1.0], [1e6]]), bandwidths=(1e-3,))
    assert np.isclose(out["kernel 0.001"][2], 1.5)  # member 2 is ~1e6 medians away from both others


def test_squared_advantages_by_step_within_the_segment():
    # One group of two members over two steps, gamma 0.5; member 1 ends after its first step.
    rewards = np.array([[1.0, 3.0], [2.0, 0.0]])
    inputs = AdvantageInputs(
        rewards=rewards,
        episode_starts=np.array([[1.0, 1.0], [0.0, 0.0]]),
        gamma=0.5,
        mask=np.array([[True, True], [True, False]]),
        group_ids=np.array([0, 0]),
    )
    obs = np.zeros((2, 2, 1))
    sums = squared_advantages(inputs, obs, horizon=4)
    # G_0 = (1 + 0.5 * 2, 3) = (2, 3): with two members every baseline is the other's return, A = (-1, 1).
    # Step 1 has one member alive: not counted.
    for name in ("mean", "nearest", "kernel 1"):
        assert np.allclose(sums[name][0], [2.0, 2.0])
        assert np.allclose(sums[name][1:], 0.0)
