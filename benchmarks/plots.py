"""
The plots of BENCHMARKS.md, one per entry of ``plots`` in ``benchmarks/aggregate.yml``: learning curves per env
(mean over seeds with a 95% bootstrap band), the headline scores, the throughput ratios, the equal wall-clock
curves. They need matplotlib (``pip install -e ".[bench]"``).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.blocks import Spec, headline_scores
from benchmarks.dataset import DISPLAY, ORDER, SPEC, Data, budget_label, display, read_wallclock
from benchmarks.harness import BASELINE_OF, THRESHOLDS
from benchmarks.stats import bootstrap_ci, iqm


def curves(data: Data, spec: Spec, path: Path) -> None:
    """Per env: the ``first`` cells named for it, then (unless ``order: false``) every algorithm of the row order (less
    the algorithm of a ``first`` sweep variant), on ``seeds`` (else all)."""
    rows: list[tuple[str, list[tuple[str, Iterable[int] | None]]]] = []
    for env in spec["envs"]:
        first = spec.get("first", {}).get(env, [])
        replaced = {name.split(":")[0] for name in first if ":" in name}
        order = ORDER if spec.get("order", True) else []
        names = [*first, *(n for n in order if n not in replaced)]
        rows.append((env, [(n, spec.get("seeds")) for n in names]))
    plot_curves(data, rows, path)


def plot_curves(data: Data, rows: list[tuple[str, list[tuple[str, Iterable[int] | None]]]], path: Path) -> None:
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    palette = {a: plt.cm.tab10(i) for i, a in enumerate(ORDER)}

    def color(name: str) -> Any:
        return palette.get(name.split("@")[0].split(":")[0], "grey")

    fig, axes = plt.subplots(1, len(rows), figsize=(5 * len(rows), 3.6), squeeze=False)
    for ax, (env, entries) in zip(axes[0], rows, strict=True):
        plain = {name.split("@")[0] for name, _ in entries if ":" not in name}
        shown = {name for name, _ in entries}
        for name, seeds in entries:
            runs = [data.curves[(name, env, c["seed"])] for c in data.cells_of(env, name, seeds)]
            if not runs:
                continue
            grid = np.linspace(max(r[0, 0] for r in runs), min(r[-1, 0] for r in runs), 60)
            ys = np.stack([np.interp(grid, r[:, 0], r[:, 1]) for r in runs])
            label = f"{display(name)}, {budget_label(data.cells_of(env, name)[0]['budget'])} ({len(runs)})"
            style = "--" if name.split("@")[0] in shown - {name} else "-"  # beside its own cells at another budget
            if ":" in name and name.split(":")[0] in plain:
                style = "-."  # a sweep variant beside its algorithm's entry
            ax.plot(grid, ys.mean(0), label=label, color=color(name), ls=style)
            if len(runs) > 1:
                band = np.array([bootstrap_ci(ys[:, j], stat="mean", reps=300) for j in range(len(grid))])
                ax.fill_between(grid, band[:, 0], band[:, 1], color=color(name), alpha=0.2)
        ax.axhline(THRESHOLDS[env], color="grey", ls=":", lw=1)
        ax.set_ylim(*_curve_limits(ax, THRESHOLDS[env]))
        ax.set_title(env)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1000:.0f}k"))
        ax.set_xlabel("env steps")
        ax.set_ylabel("eval return")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _curve_limits(ax: Any, threshold: float) -> tuple[float, float]:
    """The y range of a curves panel: its mean curves and the threshold, with a margin. A band (a bootstrap interval
    over a few seeds) that reaches far past every mean is cut at the edge instead of squashing the curves; so is a
    threshold more than the curves' own span away from them (Ant-v5's 6000 above curves below 1100)."""
    means = np.concatenate([line.get_ydata() for line in ax.get_lines() if line.get_label()[:1] != "_"] or [[threshold]])
    lo, hi = means.min(), means.max()
    if lo - (hi - lo) <= threshold <= hi + (hi - lo):
        lo, hi = min(lo, threshold), max(hi, threshold)
    margin = 0.15 * (hi - lo or abs(hi) or 1.0)
    return lo - margin, hi + margin


def headline(data: Data, spec: Spec, path: Path) -> None:
    """IQM of the normalised final scores with their 95% intervals, ours and the baseline per row; a baseline that
    two rows share (the same cells, e.g. SB3 PPO on classic control for GRPO and AdaptiveKLPPO) is drawn once."""
    import matplotlib.pyplot as plt

    labels, points, errors, colors = [], [], [], []
    palette = {a: plt.cm.tab10(i) for i, a in enumerate(ORDER)}
    drawn: list[tuple[str, list[np.ndarray]]] = []
    for ours, base, what, _, scores, _ in headline_scores(data, spec["rows"]):
        for key in (ours, base):
            label = f"{DISPLAY[key]} ({what})"
            if any(label == seen and _same(scores[key], kept) for seen, kept in drawn):
                continue
            drawn.append((label, scores[key]))
            point = iqm(np.concatenate(scores[key]))
            lo, hi = bootstrap_ci(scores[key])
            labels.append(label)
            points.append(point)
            errors.append((point - lo, hi - point))
            colors.append(palette[key])
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(labels) + 1.0))
    y = np.arange(len(labels))[::-1]
    ax.barh(y, points, xerr=np.array(errors).T, color=colors)
    ax.set_yticks(y, labels, fontsize=8)
    ax.axvline(1.0, color="grey", ls=":", lw=1)
    ax.set_xlabel("IQM of normalised final scores (95% CI); 1.0 = threshold")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """Whether two lists of per-env score arrays are equal."""
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def throughput(data: Data, spec: Spec, path: Path) -> None:
    """Each algorithm's fps and update time over its baseline's."""
    import matplotlib.pyplot as plt

    rows = [r for r in csv.DictReader((data.results / spec["file"]).open()) if r["algo"] not in ("ppo", "trpo")]
    labels = [f"{DISPLAY[r['algo']]} / {DISPLAY[BASELINE_OF[r['algo']]]}, {r['env']}" for r in rows]
    palette = {a: plt.cm.tab10(i) for i, a in enumerate(ORDER)}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 0.35 * len(rows) + 1.2))
    for ax, key, xlabel in (
        (ax1, "fps_ratio", "training fps / baseline's (higher is faster)"),
        (ax2, "update_ratio", "time per update / baseline's (lower is faster)"),
    ):
        ax.barh(labels, [float(r[key]) for r in rows], color=[palette[r["algo"]] for r in rows])
        ax.axvline(1.0, color="k", lw=1)
        ax.set_xlabel(xlabel)
        ax.tick_params(axis="y", labelsize=8)
    ax2.set_yticklabels([])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def wallclock_lines(
    results: list[dict[str, Any]], points: list[dict[str, Any]], env: str, baseline_steps: int
) -> list[tuple[str, bool, list[float], list[float]]]:
    """The equal wall-clock curves of ``env``: per run and seed where a baseline trained ``baseline_steps`` steps with
    no time limit (a row within a rollout above them counts) and one of ours then trained for its seconds, the two
    curves as (algorithm, is the baseline, training seconds / the baseline's, returns)."""
    from benchmarks.bench_wallclock import with_baselines

    lines = []
    for ours, base in with_baselines(results):
        if ours["env"] != env or float(base["seconds"]) != float("inf"):
            continue
        if int(base["steps"]) // 100_000 * 100_000 != baseline_steps:
            continue
        for row in (ours, base):
            curve = [
                (float(p["train_seconds"]) / float(base["train_seconds"]), float(p["eval_mean"]))
                for p in points
                if (p["run"], p["env"], p["algo"], p["seed"]) == (row["run"], env, row["algo"], row["seed"])
            ]
            if curve:
                lines.append((row["algo"], row is base, [x for x, _ in curve], [y for _, y in curve]))
    return lines


def wallclock(data: Data, spec: Spec, path: Path) -> None:
    """Equal wall-clock curves (``bench_wallclock``'s evaluations, ``wallclock_curves.csv``): per env, the return of
    each of ours (solid) and of its baseline (dashed) against the training seconds as a fraction of the seconds the
    baseline took for ``baseline_steps`` steps in the same run and seed (1.0: where ours stops); a line per run and
    seed (:func:`wallclock_lines`)."""
    import matplotlib.pyplot as plt

    results, points = read_wallclock(data.results / spec["results"], data.results / spec["file"])
    palette = {a: plt.cm.tab10(i) for i, a in enumerate(ORDER)}
    fig, axes = plt.subplots(1, len(spec["envs"]), figsize=(5 * len(spec["envs"]), 3.6), squeeze=False)
    for ax, env in zip(axes[0], spec["envs"], strict=True):
        drawn: set[str] = set()
        for algo, is_baseline, xs, ys in wallclock_lines(results, points, env, spec["baseline_steps"]):
            label = display(algo)
            color = palette.get(algo.partition(":")[0], "grey")
            ax.plot(xs, ys, ls="--" if is_baseline else "-", color=color, lw=1, label=None if label in drawn else label)
            drawn.add(label)
        if not drawn:
            ax.text(0.5, 0.5, "no run with curves yet", ha="center", va="center", transform=ax.transAxes)
        ax.axhline(THRESHOLDS[env], color="grey", ls=":", lw=1)
        ax.set_title(env)
        ax.set_xlabel(f"training seconds / the baseline's for {spec['baseline_steps'] // 1000}k steps")
        ax.set_ylabel("eval return")
        if drawn:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


KINDS = {"curves": curves, "headline": headline, "throughput": throughput, "wallclock": wallclock}


def plots(data: Data, out: Path) -> list[Path]:
    """The plots of BENCHMARKS.md; ``[]`` (and a note) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print("matplotlib is not installed: plots skipped (pip install -e '.[bench]')", file=sys.stderr)
        return []
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, spec in SPEC["plots"].items():
        KINDS[spec["kind"]](data, spec, out / name)
        written.append(out / name)
    return written
