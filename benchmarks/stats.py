"""
The statistics of the benchmark tables, written out so that the tables need numpy alone.

Interquartile means (IQM) with 95% stratified bootstrap intervals (2,000 resamples, seed 0) as rliable computes them,
Fisher's exact test on 2x2 counts and the Mann-Whitney U test (normal approximation, tie and continuity corrected),
both two-sided, as ``scipy.stats`` computes them (``benchmarks/tests/test_aggregate.py`` holds scipy's values).

Sources: Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge of the Statistical Precipice" (IQM, stratified
bootstrap); ``scipy.stats.fisher_exact`` and ``scipy.stats.mannwhitneyu(method="asymptotic")``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

REPS = 2000


def iqm(x: Iterable[float]) -> float:
    """Interquartile mean: the mean of the middle half (rliable's ``aggregate_iqm`` on one task)."""
    a = np.sort(np.asarray(list(x) if not isinstance(x, np.ndarray) else x, dtype=float).ravel())
    return float(_iqm_rows(a[None, :])[0]) if len(a) else float("nan")


def _iqm_rows(a: np.ndarray) -> np.ndarray:
    """IQM of each row of an already sorted ``(reps, n)`` array."""
    n = a.shape[1]
    lo, hi = int(np.floor(0.25 * n)), int(np.ceil(0.75 * n))
    return a[:, lo:hi].mean(axis=1) if hi > lo else a.mean(axis=1)


def bootstrap_ci(
    tasks: list[np.ndarray] | np.ndarray, stat: str = "iqm", reps: int = REPS, seed: int = 0
) -> tuple[float, float]:
    """95% percentile interval of ``stat`` (``iqm`` or ``mean``) over the pooled runs, resampling the runs of each task
    separately (stratified bootstrap, as rliable). ``tasks`` is one array of runs, or a list with one per task."""
    groups = [np.asarray(tasks, dtype=float)] if isinstance(tasks, np.ndarray) else [np.asarray(t, float) for t in tasks]
    if sum(len(g) for g in groups) < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    samples = np.concatenate([g[rng.integers(0, len(g), size=(reps, len(g)))] for g in groups], axis=1)
    values = _iqm_rows(np.sort(samples, axis=1)) if stat == "iqm" else samples.mean(axis=1)
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test on the 2x2 table [[a, b], [c, d]] (as ``scipy.stats.fisher_exact``)."""
    row1, col1, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        return math.comb(col1, x) * math.comb(n - col1, row1 - x) / math.comb(n, row1)

    observed = prob(a)
    support = range(max(0, row1 + col1 - n), min(row1, col1) + 1)
    return min(1.0, sum(p for p in map(prob, support) if p <= observed * (1 + 1e-7)))


def mann_whitney(x: Iterable[float], y: Iterable[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test, normal approximation with tie and continuity corrections
    (``scipy.stats.mannwhitneyu(..., method="asymptotic")``)."""
    x, y = np.asarray(list(x), float), np.asarray(list(y), float)
    n1, n2 = len(x), len(y)
    values = np.concatenate([x, y])
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    _, counts = np.unique(values, return_counts=True)
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - float((counts**3 - counts).sum()) / (n * (n - 1))))
    if sigma == 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / sigma
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))
