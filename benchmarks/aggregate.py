"""
Aggregate the harness's cells into tables and plots.

    python -m benchmarks.aggregate [--raw benchmarks/results/raw] [--out benchmarks/results] [--envs ...] [--algos ...]

Writes ``summary.md`` (per-env table and aggregate table), ``curves.png`` (learning curves, mean and 95% bootstrap
band over seeds), ``aggregate.png`` (IQM of normalised final scores with 95% bootstrap CIs, and the performance
profile) and ``throughput.png`` (training fps and update time as ratios to the baseline). Interquartile means and
bootstrap intervals come from ``rliable`` when it is installed, else from the same stratified bootstrap in numpy.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.harness import BASELINE_OF, DEFAULT_OUT, THRESHOLDS

#: (random policy score, reference score) per env for normalised scores: reference = the "solved" threshold.
NORMALISATION = {
    "CartPole-v1": (22.0, 475.0),
    "Acrobot-v1": (-500.0, -100.0),
    "Pendulum-v1": (-1200.0, -200.0),
    "LunarLander-v3": (-180.0, 200.0),
    "HalfCheetah-v5": (-290.0, 1500.0),
    "Hopper-v5": (18.0, 1000.0),
}
#: Row order of the tables and legends.
ORDER = ["grpo", "exact_trpo", "adaptive_kl_ppo", "ppo", "trpo"]


def iqm(x: np.ndarray) -> float:
    x = np.sort(np.asarray(x, dtype=float).ravel())
    n = len(x)
    if n == 0:
        return float("nan")
    lo, hi = int(np.floor(0.25 * n)), int(np.ceil(0.75 * n))
    return float(x[lo:hi].mean()) if hi > lo else float(x.mean())


def bootstrap_ci(x: np.ndarray, stat=iqm, reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    x = np.asarray(x, dtype=float).ravel()
    if len(x) < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    values = [stat(rng.choice(x, size=len(x), replace=True)) for _ in range(reps)]
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def interval(scores: dict[str, np.ndarray]) -> dict[str, tuple[float, float, float]]:
    """IQM and 95% CI per algorithm; ``scores[algo]`` is (runs, tasks)."""
    try:
        from rliable import library as rly
        from rliable import metrics

        point, ci = rly.get_interval_estimates(scores, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=2000)
        return {a: (float(point[a][0]), float(ci[a][0][0]), float(ci[a][1][0])) for a in scores}
    except Exception:  # rliable missing or a task with too few runs
        return {a: (iqm(s), *bootstrap_ci(s)) for a, s in scores.items()}


def budget_label(budget: int) -> str:
    return f"{budget // 1000}k" if budget % 1000 == 0 else str(budget)


def load(raw: Path) -> tuple[list[dict], dict[tuple, np.ndarray]]:
    """Every finished cell's summary and curve. Where one (env, algo) ran at several budgets, the cells of the smallest
    keep the algorithm's name and the others become ``algo@<budget>`` (e.g. ``ppo@300k``): rows never mix budgets."""
    loaded = [(path, json.loads(path.read_text())) for path in sorted(raw.glob("*.json"))]
    smallest: dict[tuple[str, str], int] = {}
    for _, s in loaded:
        key = (s["env"], s["algo"])
        smallest[key] = min(smallest.get(key, s["budget"]), s["budget"])
    summaries, curves = [], {}
    for path, s in loaded:
        if s["budget"] != smallest[(s["env"], s["algo"])]:
            s["algo"] = f"{s['algo']}@{budget_label(s['budget'])}"
        summaries.append(s)
        csv = path.with_suffix(".csv")
        if csv.exists():
            curves[(s["algo"], s["env"], s["seed"])] = np.loadtxt(csv, delimiter=",", skiprows=1, ndmin=2)
    return summaries, curves


def select(summaries: list[dict], envs=None, algos=None, seeds=None) -> list[dict]:
    """The cells of these envs, algorithms (``algo@<budget>`` names included) and seeds; ``None`` keeps all."""
    return [
        s
        for s in summaries
        if (not envs or s["env"] in envs) and (not algos or s["algo"] in algos) and (not seeds or s["seed"] in seeds)
    ]


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--raw", default=str(DEFAULT_OUT))
    parser.add_argument("--out", default=str(Path(DEFAULT_OUT).parent))
    parser.add_argument("--envs", nargs="+", help="only these envs (default: every env with a finished cell)")
    parser.add_argument(
        "--algos", nargs="+", help="only these algorithms, sweep variants and other budgets included (grpo:hc_b, ppo@300k)"
    )
    parser.add_argument(
        "--seeds", nargs="+", type=int, help="only these seeds (like for like where one algorithm ran more seeds)"
    )
    args = parser.parse_args(argv)
    raw, out = Path(args.raw), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summaries, curves = load(raw)
    summaries = select(summaries, args.envs, args.algos, args.seeds)
    if not summaries:
        raise SystemExit(f"no finished cells in {raw}")
    by = defaultdict(list)
    for s in summaries:
        by[(s["env"], s["algo"])].append(s)
    envs = [e for e in NORMALISATION if any(k[0] == e for k in by)] + sorted({k[0] for k in by} - set(NORMALISATION))
    algos = [a for a in ORDER if any(k[1] == a for k in by)] + sorted({k[1] for k in by} - set(ORDER))

    lines = ["## Per environment", ""]
    lines.append(
        "| env | algo | seeds | budget | final eval (mean ± std) | IQM [95% CI] | reached threshold "
        "| median steps to threshold | median train s to threshold | fps | fps ratio | update ms | update ratio "
        "| peak RSS MB |"
    )
    lines.append("|" + "---|" * 14)
    for env in envs:
        for algo in algos:
            cells = by.get((env, algo))
            if not cells:
                continue
            finals = np.array([c["final_eval"] for c in cells])
            lo, hi = bootstrap_ci(finals)
            reached = [c["steps_to_threshold"] for c in cells if c["steps_to_threshold"] is not None]
            seconds = [c["seconds_to_threshold"] for c in cells if c.get("seconds_to_threshold") is not None]
            fps = np.mean([c["fps"] for c in cells])
            upd = [c["update_ms"] for c in cells if c["update_ms"]]
            base = by.get((env, BASELINE_OF.get(algo.split("@")[0].split(":")[0], "ppo")))
            fps_ratio = fps / np.mean([c["fps"] for c in base]) if base else None
            upd_ratio = np.mean(upd) / np.mean([c["update_ms"] for c in base if c["update_ms"]]) if base and upd else None
            lines.append(
                f"| {env} | {algo} | {len(cells)} | {cells[0]['budget']:,} | {finals.mean():.1f} ± {finals.std():.1f} | "
                f"{iqm(finals):.1f} [{fmt(lo)}, {fmt(hi)}] | {len(reached)}/{len(cells)} ({THRESHOLDS.get(env, '-')}) | "
                f"{fmt(float(np.median(reached)) if reached else None, ',.0f')} | "
                f"{fmt(float(np.median(seconds)) if seconds else None, '.0f')} | {fps:,.0f} | {fmt(fps_ratio, '.2f')} | "
                f"{fmt(float(np.mean(upd)) if upd else None)} | {fmt(upd_ratio, '.2f')} | "
                f"{np.max([c['peak_rss_mb'] for c in cells]):.0f} |"
            )

    # Each algorithm against its baseline, over the envs both ran (normalised scores, all seeds of every env).
    scores: dict[str, np.ndarray] = {}
    pairs = [
        (a, BASELINE_OF.get(a.split("@")[0].split(":")[0], "ppo")) for a in algos if a.split("@")[0] not in ("ppo", "trpo")
    ]
    agg_lines = []
    for algo, base in pairs:
        common = [
            e
            for e in envs
            if e in NORMALISATION
            and (e, algo) in by
            and (e, base) in by
            and min(len(by[(e, algo)]), len(by[(e, base)])) >= 3
            # like for like: the same budget (a 300k run is not compared with a 100k one)
            and {c["budget"] for c in by[(e, algo)]} == {c["budget"] for c in by[(e, base)]}
        ]
        if not common:
            continue
        n_runs = min(min(len(by[(e, algo)]), len(by[(e, base)])) for e in common)

        def normalised(name: str, envs_: list[str] = common, n: int = n_runs) -> np.ndarray:
            cols = []
            for env in envs_:
                rnd, ref = NORMALISATION[env]
                cells = sorted(by[(env, name)], key=lambda c: c["seed"])[:n]
                cols.append((np.array([c["final_eval"] for c in cells]) - rnd) / (ref - rnd))
            return np.stack(cols, axis=1)

        pair = {algo: normalised(algo), f"{base} (vs {algo})": normalised(base)}
        est = interval(pair)
        scores.update(pair)
        (pa, la, ha), (pb, lb, hb) = est[algo], est[f"{base} (vs {algo})"]
        agg_lines.append(
            f"| {algo} | {base} | {', '.join(common)} | {n_runs} | {pa:.2f} [{la:.2f}, {ha:.2f}] | "
            f"{pb:.2f} [{lb:.2f}, {hb:.2f}] |"
        )
    if agg_lines:
        lines += ["", "## Each algorithm against its baseline, across environments", ""]
        lines.append(
            "IQM of normalised final scores, (final eval - random) / (threshold - random), over every (env, seed) run "
            "on the envs both ran with at least 3 seeds at the same budget; 95% bootstrap CIs. 1.0 = the solved threshold."
        )
        lines.append("")
        lines.append("| algo | baseline | envs | seeds per env | algo IQM [95% CI] | baseline IQM [95% CI] |")
        lines.append("|---|---|---|---|---|---|")
        lines += agg_lines
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plots(envs, algos, by, curves, scores, out)


def plots(envs, algos, by, curves, scores, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    palette = plt.cm.tab10 if len(algos) <= 10 else plt.cm.tab20  # tab10 has 10 colours: more would repeat
    colors = {a: palette(i) for i, a in enumerate(algos)}
    for name in scores:  # "ppo (vs grpo)": the baseline's colour
        colors.setdefault(name, colors.get(name.split(" ")[0], "grey"))
    cols = min(3, len(envs))
    rows = int(np.ceil(len(envs) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, env in zip(axes.ravel(), envs, strict=False):
        for algo in algos:
            runs = [curves[(algo, env, c["seed"])] for c in by.get((env, algo), []) if (algo, env, c["seed"]) in curves]
            if not runs:
                continue
            grid = np.linspace(max(r[0, 0] for r in runs), min(r[-1, 0] for r in runs), 60)
            ys = np.stack([np.interp(grid, r[:, 0], r[:, 1]) for r in runs])
            mean = ys.mean(0)
            band = (
                np.array([bootstrap_ci(ys[:, j], stat=np.mean, reps=300) for j in range(len(grid))]) if len(runs) > 1 else None
            )
            ax.plot(grid, mean, label=f"{algo} ({len(runs)})", color=colors[algo])
            if band is not None:
                ax.fill_between(grid, band[:, 0], band[:, 1], color=colors[algo], alpha=0.2)
        if env in THRESHOLDS:
            ax.axhline(THRESHOLDS[env], color="grey", ls=":", lw=1)
        ax.set_title(env)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1000:.0f}k"))
        ax.set_xlabel("env steps")
        ax.set_ylabel("eval return")
        ax.legend(fontsize=8)
    for ax in axes.ravel()[len(envs) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=110)
    plt.close(fig)

    if scores:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
        est = interval(scores)
        names = list(scores)
        ax1.barh(
            names,
            [est[a][0] for a in names],
            xerr=np.array([[est[a][0] - est[a][1], est[a][2] - est[a][0]] for a in names]).T,
            color=[colors[a] for a in names],
        )
        ax1.set_xlabel("IQM normalised score (95% CI)")
        taus = np.linspace(0, 1.2, 100)
        # Baselines scored against several algorithms ("ppo (vs grpo)", "ppo (vs adaptive_kl_ppo)") share their colour:
        # each comparison gets its own line style so the lines can be told apart.
        styles = iter(["--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 3))] * 4)
        for a in names:
            style = next(styles) if " (vs " in a else "-"
            ax2.plot(taus, [(scores[a] > t).mean() for t in taus], label=a, color=colors[a], ls=style)
        ax2.set_xlabel("normalised score τ")
        ax2.set_ylabel("fraction of runs > τ")
        ax2.set_title("performance profile")
        ax2.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "aggregate.png", dpi=110)
        plt.close(fig)

    # Throughput from the sequential run (benchmarks/bench_throughput.py), not from the cells run two at a time.
    csv = out / "throughput.csv"
    if not csv.exists():
        return
    import csv as csv_module

    rows = [r for r in csv_module.DictReader(csv.open()) if r["algo"] not in ("ppo", "trpo")]
    labels = [f"{r['algo']} / {BASELINE_OF[r['algo']]}, {r['env']}" for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 0.35 * len(rows) + 1.2))
    ax1.barh(labels, [float(r["fps_ratio"]) for r in rows], color=[colors.get(r["algo"], "grey") for r in rows])
    ax1.axvline(1.0, color="k", lw=1)
    ax1.set_xlabel("training fps / baseline's (higher is faster)")
    ax2.barh(labels, [float(r["update_ratio"]) for r in rows], color=[colors.get(r["algo"], "grey") for r in rows])
    ax2.axvline(1.0, color="k", lw=1)
    ax2.set_xlabel("time per update / baseline's (lower is faster)")
    ax2.set_yticklabels([])
    for ax in (ax1, ax2):
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle("Throughput at rl-zoo hyperparameters, one thread, one run at a time (30k steps)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
