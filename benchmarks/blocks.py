"""
The generated tables of the pages, one kind of table per function: ``BLOCKS`` maps each block name of
``benchmarks/aggregate.yml`` to its kind's function and its spec there (which cells or files it shows). A new block
of an existing kind is a few lines of YAML; a function here is a new kind of table.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import study_blocks
from benchmarks.dataset import (
    CLASSIC,
    CLASSIC_SEEDS,
    COUNT_ABOVE,
    DISPLAY,
    NORMALISATION,
    ORDER,
    SPEC,
    Data,
    budget_label,
    display,
    fmt,
    markdown,
    provenance,
    pvalue,
    read_wallclock,
    seed_list,
    tag,
    when_run,
)
from benchmarks.harness import BASELINE_OF, BASELINES, THRESHOLDS
from benchmarks.stats import bootstrap_ci, fisher_exact, iqm, mann_whitney

Spec = dict[str, Any]


# ---- the main comparison ----------------------------------------------------------------------------------------


def overview(data: Data, spec: Spec) -> str:
    """Final evaluation per env and budget, one column per algorithm."""
    merged: dict[tuple[str, int], dict[str, str]] = {}
    used: list[dict] = []
    for env, budget, names in spec["rows"]:
        seeds = CLASSIC_SEEDS if env in CLASSIC else None
        row = merged.setdefault((env, budget), {})
        for algo, name in names.items():
            data.named(env, name)  # a name the spec gives has cells
            cells = data.cells_of(env, name, seeds)
            if not cells:
                continue
            used += cells
            x = np.array([c["final_eval"] for c in cells])
            digits = ".0f" if np.abs(x).mean() >= 300 else ".1f"
            row[algo] = f"{x.mean():{digits}} ± {x.std():{digits}} ({len(x)})"
    envs = list(dict.fromkeys(env for env, _, _ in spec["rows"]))  # in the order the spec first names them
    rows = [
        [f"{env} ({budget_label(budget)})", *(merged[(env, budget)].get(a, "") for a in ORDER)]
        for env, budget in sorted(merged, key=lambda k: (envs.index(k[0]), k[1]))
    ]
    lines = markdown(["env (budget)", *(DISPLAY[a] for a in ORDER)], rows)
    lines += [
        "",
        f"Final evaluation, mean ± std over seeds (number of seeds); {provenance(used)}.",
    ]
    return "\n".join(lines)


def headline_scores(
    data: Data, rows: list[Spec]
) -> list[tuple[str, str, str, list[str], dict[str, list[np.ndarray]], list[dict]]]:
    """Per headline row: normalised final scores of ours and the baseline, per env, on the seeds both ran."""
    out = []
    for r in rows:
        ours, base = r["ours"], r["base"]
        scores: dict[str, list[np.ndarray]] = {ours: [], base: []}
        counts, used = [], []
        for env, (a, b) in r["cells"].items():
            seeds = set(data.named(env, a)) & set(data.named(env, b))
            if env in CLASSIC:
                seeds &= set(CLASSIC_SEEDS)
            rnd, ref = NORMALISATION[env]
            for key, name in ((ours, a), (base, b)):
                cells = data.cells_of(env, name, seeds)
                used += cells
                scores[key].append((np.array([c["final_eval"] for c in cells]) - rnd) / (ref - rnd))
            counts.append(f"{env.split('-')[0]} {len(seeds)}")
        out.append((ours, base, r["envs"], counts, scores, used))
    return out


def headline(data: Data, spec: Spec) -> str:
    """IQM of normalised final scores, ours against the baseline, on the seeds both ran."""
    rows, used = [], []
    for ours, base, what, counts, scores, cells in headline_scores(data, spec["rows"]):
        used += cells
        cols = [DISPLAY[ours], DISPLAY[base], what, ", ".join(counts)]
        for key in (ours, base):
            point = iqm(np.concatenate(scores[key]))
            lo, hi = bootstrap_ci(scores[key])
            cols.append(f"{point:.2f} [{lo:.2f}, {hi:.2f}]")
        rows.append(cols)
    lines = markdown(["algorithm", "baseline", "envs", "seeds per env", "IQM [95% CI]", "baseline IQM [95% CI]"], rows)
    thresholds = ", ".join(f"{e.split('-')[0]} {THRESHOLDS[e]:g}" for e in NORMALISATION)
    lines += [
        "",
        f"Normalised score: (final eval - random) / (threshold - random), 1.0 = the env's threshold ({thresholds}); "
        f"IQM over every (env, seed) run, 95% stratified bootstrap CIs. {provenance(used)}.",
    ]
    return "\n".join(lines)


def per_env_table(
    data: Data, rows: list[tuple[str, str, Iterable[int] | None]], max_budget: int | None = None, best: bool = False
) -> str:
    """One row per (env, cells): final evaluation, its IQM, the threshold reached; with ``best``, the best evaluation
    of each run too and the final one as a share of it (a run that holds what it learned is near 1)."""
    out, used = [], []
    for env, name, seeds in rows:
        cells = [c for c in data.cells_of(env, name, seeds) if max_budget is None or c["budget"] <= max_budget]
        if not cells:
            continue
        used += cells
        finals = np.array([c["final_eval"] for c in cells])
        lo, hi = bootstrap_ci(finals)
        reached = [c["steps_to_threshold"] for c in cells if c["steps_to_threshold"] is not None]
        seconds = [c["seconds_to_threshold"] for c in cells if c["seconds_to_threshold"] is not None]
        out.append(
            [
                env,
                display(name),
                budget_label(cells[0]["budget"]),
                str(len(cells)),
                f"{finals.mean():.1f} ± {finals.std():.1f}",
                f"{iqm(finals):.1f} [{fmt(lo)}, {fmt(hi)}]",
                *(
                    [
                        f"{np.mean([c['best_eval'] for c in cells]):.1f}",
                        f"{np.mean([c['final_eval'] / c['best_eval'] for c in cells if c['best_eval'] > 0]):.2f}",
                    ]
                    if best
                    else []
                ),
                f"{len(reached)}/{len(cells)}",
                fmt(float(np.median(reached)) / 1000 if reached else None, ".0f") + ("k" if reached else ""),
                fmt(float(np.median(seconds)) if seconds else None, ".0f"),
            ]
        )
    header = ["env", "algorithm", "budget", "seeds", "final eval", "IQM [95% CI]"]
    header += ["best eval", "final / best", "reached threshold"] if best else ["reached threshold"]
    lines = markdown([*header, "median steps to threshold", "median train s to threshold"], out)
    lines += ["", f"{provenance(used)}."]
    return "\n".join(lines)


def per_env(data: Data, spec: Spec) -> str:
    """Per env: the ``first`` cells named for it, then (unless ``order: false``) every algorithm of the row order (on
    ``seeds``, else all), each at most ``max_budget`` steps if given."""
    seeds = spec.get("seeds")
    rows: list[tuple[str, str, Iterable[int] | None]] = []
    for env in spec["envs"]:
        first = spec.get("first", {}).get(env, [])
        for name in first:
            data.named(env, name)  # a name the spec gives has cells
        rows += [(env, name, seeds) for name in first]
        rows += [(env, name, seeds) for name in (ORDER if spec.get("order", True) else [])]
    return per_env_table(data, rows, spec.get("max_budget"), bool(spec.get("best", False)))


def versus(data: Data, spec: Spec) -> str:
    """Each pair of cells on the seeds both ran: returns, their ratio and the Mann-Whitney test; with ``near``, the
    counts above an env's ``count_above`` (Fisher's exact test) and the first such row's cells over all their seeds.
    A name at a larger budget (``grpo@3000k``) shows its steps: the pairs of a run for a baseline's seconds."""
    rows, used = [], []
    counts = "near" in spec
    for env, name, base in spec["pairs"]:
        seeds, x, y, cells_x, cells_y = data.paired(env, name, base)
        used += cells_x + cells_y
        thr = COUNT_ABOVE.get(env)
        label = f"{env} `{tag(name)}`" if tag(name) else env  # names the configuration where it is not the entry
        if "@" in name:
            label += f", {name.partition('@')[2]} steps"
        cols = [label, seed_list(seeds), f"{x.mean():.0f} ± {x.std():.0f} (median {np.median(x):.0f})"]
        cols.append(f"{y.mean():.0f} ± {y.std():.0f} (median {np.median(y):.0f})")
        cols.append(f"{x.mean() / y.mean():.2f}")
        if counts and thr is not None:
            a, c = int((x >= thr).sum()), int((y >= thr).sum())
            cols.append(f"{a} vs {c} of {len(seeds)} (Fisher p = {pvalue(fisher_exact(a, len(x) - a, c, len(y) - c))})")
        elif counts:
            cols.append("-")
        cols.append(pvalue(mann_whitney(x, y)))
        rows.append(cols)
    name, base = spec["pairs"][0][1:]
    header = [f"env ({spec['budget']})", "seeds", display(name.split(":")[0]), display(base), "mean ratio"]
    if not counts:
        return "\n".join([*markdown([*header, "Mann-Whitney p"], rows), "", f"{provenance(used)}."])
    env, name, base = next(pair for pair in spec["pairs"] if pair[0] in COUNT_ABOVE)
    thr = COUNT_ABOVE[env]
    lines = markdown([*header, f"seeds above {thr:g}", "Mann-Whitney p"], rows)
    x = np.array(list(data.finals(env, name).values()))
    lines += [
        "",
        f"{display(name)} on {env} over all its {len(x)} seeds: {int((x >= thr).sum())} above "
        f"{thr:g}, median {np.median(x):.1f}, {int((x < spec['near']).sum())} below {spec['near']:g}. "
        f"{provenance(used)}.",
    ]
    return "\n".join(lines)


def late_falls(data: Data, spec: Spec) -> str:
    """Each run's final evaluation as a share of its best evaluation, per env and name, then over every env per
    position in the rows (ours, the baseline): how many runs end at ``share`` of their best or more and the lowest
    share; the same on the run's curve averaged over ``window`` consecutive evaluations (the last such mean against the
    highest), which tells a decline from one evaluation's episodes; and the runs below ``share`` on either."""
    share, window = float(spec["share"]), int(spec["window"])
    rows, used = [], []
    totals: dict[int, list[tuple[float, float]]] = defaultdict(list)
    labels: dict[int, str] = {}
    for env, *names in spec["rows"]:
        for position, name in enumerate(names):
            cells = list(data.named(env, name).values())
            used += cells
            ratios = [(c["final_eval"] / c["best_eval"], _smoothed_share(data, env, name, c, window)) for c in cells]
            totals[position] += ratios
            labels.setdefault(position, display(name))
            below = [f"{c['seed']}: {r:.2f} ({m:.2f})" for c, (r, m) in zip(cells, ratios, strict=True) if min(r, m) < share]
            rows.append(_late_fall_row(env, display(name), ratios, share, ", ".join(below) or "-"))
    rows += [_late_fall_row("all", labels[k], ratios, share, "") for k, ratios in sorted(totals.items())]
    header = ["env", "algorithm", "runs", f"final >= {share:g} of best", "lowest final / best"]
    header += [
        f"means of {window}: >= {share:g}",
        "lowest",
        f"below {share:g} on either (seed: final / best (means of {window}))",
    ]
    lines = markdown(header, rows)
    lines += [
        "",
        f'Each run\'s final evaluation and its best over the run; "means of {window}": the same on the mean of every '
        f"{window} consecutive evaluations. {provenance(used)}.",
    ]
    return "\n".join(lines)


def _smoothed_share(data: Data, env: str, name: str, cell: dict, window: int) -> float:
    """The last mean of ``window`` consecutive evaluations of a run's curve as a share of the highest such mean."""
    curve = data.curves.get((name, env, cell["seed"]))
    if curve is None:
        raise KeyError(f"no learning curve for {name!r} on {env}, seed {cell['seed']}")
    evals = curve[np.argsort(curve[:, 0]), 1]
    means = np.convolve(evals, np.ones(window) / window, mode="valid") if len(evals) >= window else evals[-1:]
    return float(means[-1] / means.max())


def _late_fall_row(env: str, label: str, ratios: list[tuple[float, float]], share: float, below: str) -> list[str]:
    finals, means = [r for r, _ in ratios], [m for _, m in ratios]
    counts = [str(sum(r >= share for r in finals)), f"{min(finals):.2f}", str(sum(m >= share for m in means))]
    return [env, label, str(len(ratios)), *counts, f"{min(means):.2f}", below]


def entry_reruns(data: Data, spec: Spec) -> str:
    """Zoo entries run again on a later commit (a sweep file equal to the entry), on the seeds both ran: when each
    ran (dates, newest commit, and the kernels where the cells recorded them), the final evaluations, how many end at
    the env's threshold or better, how many end bit for bit as before, and the Mann-Whitney test."""

    def ran(cells: list[dict]) -> str:
        return ", ".join([*when_run(cells), *sorted({c["kernels"] for c in cells if c.get("kernels")})])

    rows, used = [], []
    for env, first, rerun in spec["rows"]:
        seeds, x, y, ca, cb = data.paired(env, first, rerun)
        used += ca + cb
        thr = THRESHOLDS[env]
        rows.append(
            [
                env,
                display(first),
                seed_list(seeds),
                ran(ca),
                ran(cb),
                f"{x.mean():.1f} ± {x.std():.1f}",
                f"{y.mean():.1f} ± {y.std():.1f}",
                f"{int((x >= thr).sum())} / {int((y >= thr).sum())}",
                f"{int(np.isclose(x, y, rtol=0, atol=1e-6).sum())} of {len(seeds)}",
                pvalue(mann_whitney(x, y)),
            ]
        )
    header = ["env", "entry", "seeds", "first run", "rerun", "first final", "rerun final", "final at threshold"]
    header += ["identical finals", "Mann-Whitney p"]
    return "\n".join([*markdown(header, rows), "", f"{provenance(used)}."])


def versions(data: Data, spec: Spec) -> str:
    """The software, CPU and kernels the cells ran on, one row per combination."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for c in data.cells:
        sb3 = f"{c['stable_baselines3']} / {c['sb3_contrib']}"
        recorded = (c["python"], c["torch"], sb3, c["gymnasium"], c["numpy"], c["mujoco"], c["cpu"], c.get("kernels"))
        groups[tuple(v or "not recorded" for v in recorded)].append(c)
    body = [[*key, provenance(cells)] for key, cells in sorted(groups.items(), key=lambda kv: min(c["date"] for c in kv[1]))]
    header = ["python", "torch", "SB3 / contrib", "gymnasium", "numpy", "mujoco", "CPU", "kernels", "cells"]
    return "\n".join(markdown(header, body))


# ---- the speed and memory benchmarks' own files -----------------------------------------------------------------


def throughput(data: Data, spec: Spec) -> str:
    """``bench_throughput``'s table: fps and update time against the baseline's."""
    rows = list(csv.DictReader((data.results / spec["file"]).open()))
    shares = any(r.get("env_step_share") for r in rows)  # the column, once a run has measured it
    body = [
        [
            r["env"],
            DISPLAY[r["algo"]],
            r["fps"],
            r["fps_ratio"],
            r["update_ms"],
            r["update_ratio"],
            *([f"{float(r['env_step_share']):.0%}" if r.get("env_step_share") else "-"] if shares else []),
            r["peak_rss_mb"],
        ]
        for r in rows
    ]
    header = [
        "env",
        "algorithm",
        "fps",
        "fps / baseline",
        "ms per update",
        "update / baseline",
        *(["env stepping"] if shares else []),
        "peak RSS MB",
    ]
    return "\n".join(markdown(header, body))


def wallclock(data: Data, spec: Spec) -> str:
    """``benchmarks/results/wallclock.csv`` (``python -m benchmarks.bench_wallclock``): per env, each of ours beside
    its baseline after the same training seconds, and the training seconds each needed to reach the threshold. A seed's
    pair of rows always comes from one run (seconds compare only within a run); a row of the table pools the seeds of
    the runs that gave the baseline the same budget (its steps under ``--baseline-steps``, else the seconds), taking
    for each seed the latest run holding both. With several seeds: mean returns (the last evaluation and the best
    one), mean steps, median seconds to the threshold (a seed that never reaches it counts as never)."""
    from benchmarks.bench_wallclock import median_seconds_to_threshold, with_baselines

    rows, _ = read_wallclock(data.results / spec["file"])

    def seconds_text(value: float) -> str:
        return f"{value:.1f}" if math.isfinite(value) else "never"

    def means(key: str, ours: list[dict], base: list[dict], spec: str = ".1f") -> str:
        a, b = (statistics.fmean(float(r[key]) for r in rows) for rows in (ours, base))
        return f"{a:{spec}} / {b:{spec}}"

    def budget_of(baseline: dict[str, Any]) -> str:
        """What the baseline was given: its steps (``--baseline-steps``: no time limit) or the seconds."""
        return f"{baseline['steps']} steps" if math.isinf(float(baseline["seconds"])) else f"{baseline['seconds']} s"

    body = []
    rank = {name: i for i, name in enumerate(ORDER)}  # REINFORCE and OnlineDPO (not in ORDER) come last
    paired = with_baselines(rows)
    for env_id in dict.fromkeys(r["env"] for r in rows):
        present = dict.fromkeys(r["algo"] for r in rows if r["env"] == env_id and r["algo"] not in BASELINES)
        for algo in sorted(present, key=lambda a: (rank.get(a.partition(":")[0], len(ORDER)), a)):
            base_algo = BASELINE_OF[algo.partition(":")[0]]
            pairs: dict[str, dict[int, tuple[dict, dict]]] = {}  # budget -> seed -> (ours, baseline), latest run
            for r, baseline in paired:
                if r["env"] != env_id or r["algo"] != algo:
                    continue
                by_seed = pairs.setdefault(budget_of(baseline), {})
                seed = int(r["seed"])
                if seed not in by_seed or int(r["run"]) > int(by_seed[seed][0]["run"]):
                    by_seed[seed] = (r, baseline)
            for by_seed in sorted(pairs.values(), key=lambda s: max(int(o["run"]) for o, _ in s.values())):
                seeds = sorted(by_seed)
                ours, base = [by_seed[s][0] for s in seeds], [by_seed[s][1] for s in seeds]
                a, b = median_seconds_to_threshold(ours), median_seconds_to_threshold(base)
                ratio = f"{a / b:.2f}" if math.isfinite(a) and math.isfinite(b) else "-"
                body.append(
                    [
                        env_id,
                        f"{display(algo)} / {DISPLAY[base_algo]}",
                        ", ".join(sorted({r["run"] for r in ours}, key=int)),
                        ", ".join(map(str, seeds)),
                        f"{statistics.fmean(float(r['seconds']) for r in ours):.0f}",
                        means("final_return", ours, base),
                        means("best_return", ours, base),
                        means("steps", ours, base, ",.0f"),
                        f"{seconds_text(a)} / {seconds_text(b)}",
                        ratio,
                    ]
                )
    header = [
        "env",
        "ours / baseline",
        "runs",
        "seeds",
        "training seconds (mean)",
        "return at those seconds",
        "best evaluation",
        "env steps done",
        "training seconds to the threshold",
        "seconds ratio",
    ]
    return "\n".join(markdown(header, body))


def paired(data: Data, spec: Spec) -> str:
    """``bench_paired``'s rounds: the median per-round ratio of CPU time, with its interval."""
    from benchmarks.bench_paired import summarise

    body = []
    for name in spec["files"]:
        rows = []
        for r in csv.DictReader((data.results / name).open()):
            rows.append({k: (float(v) if k not in ("env", "algo") else v) for k, v in r.items()})
            rows[-1]["round"] = int(rows[-1]["round"])
            rows[-1]["steps"] = int(rows[-1]["steps"])
        for e in summarise(rows, spec["algo"], spec["baseline"]):
            lo, hi = e["cpu_ratio_ci"]
            body.append(
                [
                    e["env"],
                    str(e["rounds"]),
                    f"{e['steps_per_iteration']:,}",
                    f"{e['cpu_ratio_median']:.3f} [{lo:.3f}, {hi:.3f}]",
                    f"{e['train_cpu_ratio_median']:.3f}",
                    f"{e['rollout_cpu_ratio_median']:.3f}",
                ]
            )
    header = ["env", "rounds", "steps / iteration", "fps ratio (CPU clock), median [95% CI]", "update ratio", "rollout ratio"]
    return "\n".join(markdown(header, body))


def _instructions_per_iteration(path: Path) -> dict[str, dict[str, float]]:
    """``{env: {algo: instructions per iteration}}``: the difference between runs of two lengths over their
    difference in iterations (setup cancels out)."""
    per: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    for r in csv.DictReader(path.open()):
        per[(r["env"], r["algo"])][int(r["iterations"])] = int(r["instructions"])
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (env, algo), counts in per.items():
        out[env][algo] = (counts[max(counts)] - counts[min(counts)]) / (max(counts) - min(counts))
    return out


def instructions(data: Data, spec: Spec) -> str:
    """Instructions retired per training iteration (valgrind), the algorithm against its baseline."""
    body = []
    algo, baseline = spec["algo"], spec["baseline"]
    for env, m in _instructions_per_iteration(data.results / spec["file"]).items():
        ours, ppo = m[algo], m[baseline]
        body.append([env, f"{ours / 1e6:,.1f}", f"{ppo / 1e6:,.1f}", f"{ppo / ours:.3f}"])
    header = ["env", f"{DISPLAY[algo]} (M instr / iteration)", f"{DISPLAY[baseline].split()[-1]} (M instr / iteration)"]
    lines = markdown([*header, "ratio"], body)
    rollouts = data.results / spec["rollouts"]
    if rollouts.exists():  # the same with train() skipped: both policies keep their initial weights
        for env, m in _instructions_per_iteration(rollouts).items():
            ours, ppo = m[algo], m[baseline]
            lines += [
                "",
                f"{env}, rollout alone: {ours / 1e6:,.1f} against {ppo / 1e6:,.1f} M instructions, ratio {ppo / ours:.3f}.",
            ]
    return "\n".join(lines)


def soak(data: Data, spec: Spec) -> str:
    """Memory and fps over a long run, per algorithm: first and last window."""
    rows = list(csv.DictReader((data.results / spec["file"]).open()))
    body = []
    for algo in dict.fromkeys(r["algo"] for r in rows):
        rs = [r for r in rows if r["algo"] == algo]
        fps = sorted(float(r["fps_window"]) for r in rs)
        body.append(
            [
                DISPLAY[algo],
                rs[0]["n_envs"],
                f"{float(rs[0]['rss_main_mb']):.0f} -> {float(rs[-1]['rss_main_mb']):.0f}",
                f"{float(rs[0]['rss_workers_mb']):.0f} -> {float(rs[-1]['rss_workers_mb']):.0f}",
                f"{fps[0]:.0f} / {np.median(fps):.0f} / {fps[-1]:.0f}",
            ]
        )
    header = [
        "algorithm",
        "envs",
        "main RSS MiB, first -> last window",
        "workers' RSS MiB",
        "fps per window (min / median / max)",
    ]
    return "\n".join(markdown(header, body))


def arithmetic(data: Data, spec: Spec) -> str:
    """Accuracy per configuration of a question-answer run file (mean ± std over its seeds)."""
    result = json.loads((data.results / spec["file"]).read_text())
    body = []
    for config, label in spec["configs"].items():
        acc = np.array([r["accuracy"] for r in result["runs"] if r["config"] == config])
        body.append([label, f"{acc.mean():.2f} ± {acc.std():.2f}"])
    header = ["configuration", f"accuracy, mean ± std over {len(result['seeds'])} seeds"]
    return "\n".join(markdown(header, body))


# ---- the blocks -------------------------------------------------------------------------------------------------

#: Each kind of table: a function of the data and the block's spec.
KINDS: dict[str, Callable[[Data, Spec], str]] = {
    "overview": overview,
    "headline": headline,
    "per_env": per_env,
    "versus": versus,
    "entry_reruns": entry_reruns,
    "late_falls": late_falls,
    "versions": versions,
    "throughput": throughput,
    "wallclock": wallclock,
    "paired": paired,
    "instructions": instructions,
    "soak": soak,
    "arithmetic": arithmetic,
    "ladder": study_blocks.ladder,
    "variants": study_blocks.variants,
    "reruns": study_blocks.reruns,
    "curve_points": study_blocks.curve_points,
    "against_entry": study_blocks.against_entry,
}
#: Every generated block of the pages, by name: its kind's function with its spec (benchmarks/aggregate.yml).
BLOCKS: dict[str, Callable[[Data], str]] = {
    name: partial(KINDS[spec["kind"]], spec=spec) for name, spec in SPEC["blocks"].items()
}
