"""The y range of a curves panel (benchmarks.plots._curve_limits)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from benchmarks.plots import _curve_limits


def _limits(curves: list[list[float]], threshold: float) -> tuple[float, float]:
    fig, ax = plt.subplots()
    for i, ys in enumerate(curves):
        ax.plot(range(len(ys)), ys, label=f"run {i}")
    ax.plot([0, 1], [-1e6, 1e6], label="_band edge")  # unlabelled lines (bands, thresholds) set no limit
    try:
        return _curve_limits(ax, threshold)
    finally:
        plt.close(fig)


def test_a_threshold_near_the_curves_is_in_view():
    lo, hi = _limits([[0.0, 800.0, 900.0]], 1000.0)
    assert lo < 0.0 and hi > 1000.0
    assert hi - lo == 1.3 * 1000.0


def test_a_threshold_far_from_the_curves_is_left_out_of_view():
    lo, hi = _limits([[0.0, 700.0, 1100.0]], 6000.0)  # Ant-v5: curves below 1100, threshold 6000
    assert (lo, hi) == (0.0 - 0.15 * 1100.0, 1100.0 + 0.15 * 1100.0)
    lo, hi = _limits([[-100.0, 0.0]], -2000.0)  # far below as well
    assert lo == -115.0
