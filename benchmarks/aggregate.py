"""
Rebuild every benchmark table and plot from the committed data files.

    python -m benchmarks.aggregate            # rewrite the generated tables in place, and the plots
    python -m benchmarks.aggregate --check    # exit 1 if a generated table differs from what the data gives
    python -m benchmarks.aggregate --summary - --envs Hopper-v5 --algos grpo:hop_fl ppo@300k   # any selection

Data: ``benchmarks/results/cells.csv.gz`` and ``curves.csv.gz`` (the harness cells, see ``benchmarks/table.py``),
``throughput.csv``, ``paired_adaptive_kl_ppo*.csv``, ``instructions_adaptive_kl_ppo.csv``, ``soak.csv`` and
``arithmetic.json`` (the other benchmark scripts). Tables are the blocks between ``<!-- aggregate: NAME -->`` and
``<!-- /aggregate -->`` in README.md, BENCHMARKS.md and docs/guide/grpo_studies.md; plots go to
``benchmarks/results/*.png`` (they need matplotlib, ``pip install -e ".[bench]"``; the tables need numpy alone).

Names: ``grpo`` is the zoo entry's cells, ``grpo:<tag>`` a sweep variant's, ``<name>@300k`` the cells of a second
budget (where one configuration ran at several budgets, the smallest keeps the name). Statistics: interquartile
means (IQM) with 95% stratified bootstrap intervals (2,000 resamples, seed 0), Fisher's exact test on counts and
the Mann-Whitney U test (normal approximation, tie and continuity corrected) on final returns, both two-sided.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import table
from benchmarks.harness import BASELINE_OF, BASELINES, THRESHOLDS

ROOT = table.ROOT
RESULTS = table.RESULTS
#: The files whose ``<!-- aggregate: NAME -->`` blocks are generated.
PAGES = (ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "docs" / "guide" / "grpo_studies.md")

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
ORDER = ["grpo", "adaptive_kl_ppo", "ppo", "exact_trpo", "trpo"]
CLASSIC = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1")
LARGE = ("HalfCheetah-v5", "Hopper-v5", "LunarLander-v3")
DISPLAY = {
    "grpo": "GRPO",
    "exact_trpo": "ExactTRPO",
    "adaptive_kl_ppo": "AdaptiveKLPPO",
    "reinforce": "REINFORCE",
    "online_dpo": "OnlineDPO",
    "ppo": "SB3 PPO",
    "trpo": "sb3-contrib TRPO",
}
#: The cells of GRPO's zoo entry where they were run under a sweep name (the entry equals that sweep file; checked by
#: benchmarks/tests/test_aggregate.py). HalfCheetah-v5: ``hc_rerun11``, the 8 seeds run beside PPO's on one machine.
GRPO_ENTRY = {"HalfCheetah-v5": "grpo:hc_rerun11", "Hopper-v5": "grpo:hop_antl15g1lr5"}
#: Zoo entries changed after their cells ran: (algorithm, env) -> the sweep variant whose file is the new entry.
#: ``load`` gives that variant's cells the algorithm's name and the earlier entry's cells the name ``<algo>:previous``.
#: AdaptiveKLPPO on Pendulum-v1: gSDE as in rl-zoo's PPO entry (``pend_sde``, 2026-11-25).
ENTRY_CHANGES = {("adaptive_kl_ppo", "Pendulum-v1"): "adaptive_kl_ppo:pend_sde"}
REPS = 2000


# ---- statistics -------------------------------------------------------------------------------------------------


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


# ---- data -------------------------------------------------------------------------------------------------------


def budget_label(budget: int) -> str:
    return f"{budget // 1000}k" if budget % 1000 == 0 else str(budget)


def entry_name(label: str, env: str) -> str:
    """The name of a cell labelled ``label`` on ``env`` (see :data:`ENTRY_CHANGES`)."""
    algo = label.partition(":")[0]
    variant = ENTRY_CHANGES.get((algo, env))
    if variant is None:
        return label
    return algo if label == variant else f"{algo}:previous" if label == algo else label


def load(cells: Path = table.CELLS, curves: Path | None = table.CURVES) -> tuple[list[dict], dict[tuple, np.ndarray]]:
    """Every cell of the table (``algo`` = its name: ``grpo``, ``grpo:hc_g8``, ``ppo@300k``) and every curve
    (``(name, env, seed)`` -> rows of timesteps, eval mean, eval std, train seconds, RSS). Where one configuration ran
    at several budgets on an env, the cells of the smallest keep its name and the others become ``<name>@<budget>``:
    rows never mix budgets."""
    rows = table.read_cells(cells)
    smallest: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (r["env"], table.cell_label(r))
        smallest[key] = min(smallest.get(key, r["budget"]), r["budget"])
    summaries = []
    for r in rows:
        label = table.cell_label(r)
        name = entry_name(label, r["env"])
        if r["budget"] != smallest[(r["env"], label)]:
            name = f"{name}@{budget_label(r['budget'])}"
        summaries.append({**r, "algo": name, "hyperparams": json.loads(r["hyperparams"] or "{}")})
    curve_map: dict[tuple, np.ndarray] = {}
    if curves is not None:
        names = {
            (r["env"], table.cell_label(r), r["seed"], r["budget"]): s["algo"] for r, s in zip(rows, summaries, strict=True)
        }
        points: dict[tuple, list] = defaultdict(list)
        for c in table.read_curves(curves):
            name = names.get((c["env"], table.cell_label(c), c["seed"], c["budget"]))
            if name is not None:
                points[(name, c["env"], c["seed"])].append(
                    (c["timesteps"], c["eval_mean"], c["eval_std"], c["train_seconds"], c["rss_mb"])
                )
        curve_map = {k: np.array(v, dtype=float) for k, v in points.items()}
    return summaries, curve_map


def select(summaries: list[dict], envs=None, algos=None, seeds=None) -> list[dict]:
    """The cells of these envs, algorithms (``algo@<budget>`` names included) and seeds; ``None`` keeps all."""
    return [
        s
        for s in summaries
        if (not envs or s["env"] in envs) and (not algos or s["algo"] in algos) and (not seeds or s["seed"] in seeds)
    ]


@dataclass
class Data:
    cells: list[dict]
    curves: dict[tuple, np.ndarray]
    results: Path
    by: dict[tuple[str, str], dict[int, dict]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for s in self.cells:
            self.by.setdefault((s["env"], s["algo"]), {})[s["seed"]] = s

    def finals(self, env: str, name: str, seeds: Iterable[int] | None = None) -> dict[int, float]:
        cells = self.by.get((env, name), {})
        return {k: c["final_eval"] for k, c in sorted(cells.items()) if seeds is None or k in seeds}

    def cells_of(self, env: str, name: str, seeds: Iterable[int] | None = None) -> list[dict]:
        cells = self.by.get((env, name), {})
        return [c for k, c in sorted(cells.items()) if seeds is None or k in seeds]


# ---- formatting -------------------------------------------------------------------------------------------------


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def pvalue(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.2f}"


def seed_list(seeds: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``0-2, 5, 7-8``."""
    seeds = sorted(seeds)
    parts: list[str] = []
    start = seeds[0]
    for i, seed in enumerate(seeds):
        if i + 1 == len(seeds) or seeds[i + 1] != seed + 1:
            parts.append(str(start) if start == seed else f"{start}-{seed}")
            start = seeds[i + 1] if i + 1 < len(seeds) else seed
    return ", ".join(parts)


def provenance(cells: Iterable[dict]) -> str:
    """When and on which commits the cells ran: the dates and the newest commit."""
    cells = list(cells)
    dates = sorted({c["date"] for c in cells if c["date"]})
    commits = {c["commit"] for c in cells if c["commit"]}
    newest = max(cells, key=lambda c: (c["date"], c["commit"]))["commit"] if commits else "-"
    span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    return f"{len(cells)} cells run {span}, {len(commits)} commit{'s' if len(commits) != 1 else ''} (newest {newest})"


def display(name: str) -> str:
    base = name.split("@")[0]
    algo, _, variant = base.partition(":")
    label = DISPLAY.get(algo, algo)
    if name in GRPO_ENTRY.values():
        return label
    return f"{label} `{variant}`" if variant else label


def markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


# ---- hyperparameter differences ---------------------------------------------------------------------------------


class _Module:
    def __getattr__(self, name: str) -> str:
        return f"nn.{name}"


def flatten(hp: dict[str, Any]) -> dict[str, Any]:
    """A zoo entry as flat ``key -> value`` (``policy_kwargs`` and ``normalize`` strings parsed, nested dicts dotted;
    ``normalize: false`` and ``policy`` dropped, as they change nothing)."""
    out: dict[str, Any] = {}

    def parse(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("dict("):
            return eval(value, {"nn": _Module(), "dict": dict})  # the harness evaluates these strings too
        if isinstance(value, str) and value.startswith("{"):
            return ast.literal_eval(value)
        if isinstance(value, str) and value.startswith("lin_"):  # lin_0.002 and lin_2e-3 are one schedule
            return f"lin_{float(value[4:]):g}"
        return value

    for key, value in hp.items():
        value = parse(value)
        if key in ("policy", "n_timesteps") or (key == "normalize" and value is False):
            continue
        if key == "normalize" and value is True:
            value = {"norm_obs": True, "norm_reward": True}
        if isinstance(value, dict):
            for k, v in value.items():
                out[f"{key}.{k}"] = v
        else:
            out[key] = value
    return out


def change(base: dict[str, Any], variant: dict[str, Any]) -> str:
    """What ``variant`` sets differently from ``base``: ``key value`` for each changed or added key, ``no key`` for each
    removed one."""
    a, b = flatten(base), flatten(variant)
    parts = []
    for key in sorted(set(a) | set(b)):
        if key not in b:
            parts.append(f"no {key}")
        elif a.get(key, None) != b[key] or key not in a:
            value = b[key]
            text = value if isinstance(value, str) else json.dumps(value)
            parts.append(f"{key} {text}")
    return ", ".join(parts) if parts else "(same)"


def hyperparams_of(data: Data, env: str, name: str) -> dict[str, Any]:
    cells = data.cells_of(env, name)
    return cells[0]["hyperparams"] if cells else {}


# ---- blocks -----------------------------------------------------------------------------------------------------

#: Per env: the cells that stand for each algorithm in the overview (name, seeds or None for all).
OVERVIEW_ROWS = [
    ("CartPole-v1", 100_000, {"grpo": "grpo", "ppo": "ppo", "adaptive_kl_ppo": "adaptive_kl_ppo"}),
    ("CartPole-v1", 100_000, {"exact_trpo": "exact_trpo", "trpo": "trpo"}),
    ("Acrobot-v1", 200_000, {"grpo": "grpo", "ppo": "ppo", "adaptive_kl_ppo": "adaptive_kl_ppo"}),
    ("Acrobot-v1", 100_000, {"exact_trpo": "exact_trpo", "trpo": "trpo"}),
    ("Pendulum-v1", 300_000, {"grpo": "grpo", "ppo": "ppo", "adaptive_kl_ppo": "adaptive_kl_ppo"}),
    ("Pendulum-v1", 100_000, {"exact_trpo": "exact_trpo", "trpo": "trpo"}),
    ("LunarLander-v3", 200_000, {a: a for a in ORDER}),
    ("HalfCheetah-v5", 100_000, {a: a for a in ("ppo", "adaptive_kl_ppo", "exact_trpo", "trpo")}),
    ("HalfCheetah-v5", 300_000, {"grpo": GRPO_ENTRY["HalfCheetah-v5"], "ppo": "ppo@300k"}),
    ("Hopper-v5", 100_000, {a: a for a in ("ppo", "adaptive_kl_ppo", "exact_trpo", "trpo")}),
    ("Hopper-v5", 300_000, {"grpo": GRPO_ENTRY["Hopper-v5"], "ppo": "ppo@300k"}),
]
CLASSIC_SEEDS = range(5)


def block_overview(data: Data) -> str:
    """Final evaluation per env and budget, one column per algorithm."""
    merged: dict[tuple[str, int], dict[str, str]] = {}
    used: list[dict] = []
    for env, budget, names in OVERVIEW_ROWS:
        seeds = CLASSIC_SEEDS if env in CLASSIC else None
        row = merged.setdefault((env, budget), {})
        for algo, name in names.items():
            cells = data.cells_of(env, name, seeds)
            if not cells:
                continue
            used += cells
            x = np.array([c["final_eval"] for c in cells])
            digits = ".0f" if np.abs(x).mean() >= 300 else ".1f"
            row[algo] = f"{x.mean():{digits}} ± {x.std():{digits}} ({len(x)})"
    rows = [
        [f"{env} ({budget_label(budget)})", *(merged[(env, budget)].get(a, "") for a in ORDER)]
        for env, budget in sorted(merged, key=lambda k: (list(NORMALISATION).index(k[0]), k[1]))
    ]
    lines = markdown(["env (budget)", *(DISPLAY[a] for a in ORDER)], rows)
    lines += [
        "",
        f"Final evaluation, mean ± std over seeds (number of seeds); {provenance(used)}.",
    ]
    return "\n".join(lines)


#: (ours, baseline, {env: (our cells, baseline cells)}): each pair on the seeds both ran.
HEADLINE = [
    ("grpo", "ppo", "classic control", {e: ("grpo", "ppo") for e in CLASSIC}),
    ("adaptive_kl_ppo", "ppo", "classic control", {e: ("adaptive_kl_ppo", "ppo") for e in CLASSIC}),
    ("exact_trpo", "trpo", "classic control, 100k", {e: ("exact_trpo", "trpo") for e in CLASSIC}),
    (
        "grpo",
        "ppo",
        "MuJoCo 300k, LunarLander 200k",
        {
            "HalfCheetah-v5": (GRPO_ENTRY["HalfCheetah-v5"], "ppo@300k"),
            "Hopper-v5": (GRPO_ENTRY["Hopper-v5"], "ppo@300k"),
            "LunarLander-v3": ("grpo", "ppo"),
        },
    ),
    ("adaptive_kl_ppo", "ppo", "MuJoCo 100k, LunarLander 200k", {e: ("adaptive_kl_ppo", "ppo") for e in LARGE}),
    ("exact_trpo", "trpo", "MuJoCo 100k, LunarLander 200k", {e: ("exact_trpo", "trpo") for e in LARGE}),
]


def headline_scores(data: Data) -> list[tuple[str, str, str, list[str], dict[str, list[np.ndarray]], list[dict]]]:
    """Per headline row: normalised final scores of ours and the baseline, per env, on the seeds both ran."""
    out = []
    for ours, base, what, envs in HEADLINE:
        scores: dict[str, list[np.ndarray]] = {ours: [], base: []}
        counts, used = [], []
        for env, (a, b) in envs.items():
            seeds = set(data.finals(env, a)) & set(data.finals(env, b))
            if env in CLASSIC:
                seeds &= set(CLASSIC_SEEDS)
            rnd, ref = NORMALISATION[env]
            for key, name in ((ours, a), (base, b)):
                cells = data.cells_of(env, name, seeds)
                used += cells
                scores[key].append((np.array([c["final_eval"] for c in cells]) - rnd) / (ref - rnd))
            counts.append(f"{env.split('-')[0]} {len(seeds)}")
        out.append((ours, base, what, counts, scores, used))
    return out


def block_headline(data: Data) -> str:
    """IQM of normalised final scores, ours against the baseline, on the seeds both ran."""
    rows, used = [], []
    for ours, base, what, counts, scores, cells in headline_scores(data):
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


def per_env_table(data: Data, rows: list[tuple[str, str, Iterable[int] | None]]) -> str:
    out, used = [], []
    for env, name, seeds in rows:
        cells = data.cells_of(env, name, seeds)
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
                f"{len(reached)}/{len(cells)}",
                fmt(float(np.median(reached)) / 1000 if reached else None, ".0f") + ("k" if reached else ""),
                fmt(float(np.median(seconds)) if seconds else None, ".0f"),
            ]
        )
    header = ["env", "algorithm", "budget", "seeds", "final eval", "IQM [95% CI]", "reached threshold"]
    lines = markdown([*header, "median steps to threshold", "median train s to threshold"], out)
    lines += ["", f"{provenance(used)}."]
    return "\n".join(lines)


def block_classic(data: Data) -> str:
    """Classic control, seeds 0-4 of every algorithm."""
    return per_env_table(data, [(env, name, CLASSIC_SEEDS) for env in CLASSIC for name in ORDER])


def block_large(data: Data) -> str:
    """MuJoCo and LunarLander: every seed of each algorithm's cells."""
    rows: list[tuple[str, str, Iterable[int] | None]] = []
    for env in LARGE:
        if env in GRPO_ENTRY:
            rows += [(env, GRPO_ENTRY[env], None), (env, "ppo@300k", None)]
        rows += [(env, name, None) for name in ORDER]
    return per_env_table(data, rows)


def block_grpo_vs_ppo(data: Data) -> str:
    """GRPO's MuJoCo entries against SB3 PPO at the same budget (300k) and seeds."""
    rows, used = [], []
    for env, name in GRPO_ENTRY.items():
        g, p = data.finals(env, name), data.finals(env, "ppo@300k")
        seeds = sorted(set(g) & set(p))
        x, y = np.array([g[s] for s in seeds]), np.array([p[s] for s in seeds])
        used += data.cells_of(env, name, seeds) + data.cells_of(env, "ppo@300k", seeds)
        thr = THRESHOLDS[env] if env == "Hopper-v5" else None
        cols = [env, seed_list(seeds), f"{x.mean():.0f} ± {x.std():.0f} (median {np.median(x):.0f})"]
        cols.append(f"{y.mean():.0f} ± {y.std():.0f} (median {np.median(y):.0f})")
        cols.append(f"{x.mean() / y.mean():.2f}")
        if thr is not None:
            a, c = int((x >= thr).sum()), int((y >= thr).sum())
            cols.append(f"{a} vs {c} of {len(seeds)} (Fisher p = {pvalue(fisher_exact(a, len(x) - a, c, len(y) - c))})")
        else:
            cols.append("-")
        cols.append(pvalue(mann_whitney(x, y)))
        rows.append(cols)
    header = ["env (300k)", "seeds", "GRPO", "SB3 PPO", "mean ratio", "seeds above 1000", "Mann-Whitney p"]
    lines = markdown(header, rows)
    hop = np.array(list(data.finals("Hopper-v5", GRPO_ENTRY["Hopper-v5"]).values()))
    lines += [
        "",
        f"GRPO's Hopper entry over all its {len(hop)} seeds: {int((hop >= 1000).sum())} above 1000, median "
        f"{np.median(hop):.1f}, {int((hop < 990).sum())} below 990. {provenance(used)}.",
    ]
    return "\n".join(lines)


def block_throughput(data: Data) -> str:
    path = data.results / "throughput.csv"
    rows = list(csv.DictReader(path.open()))
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


def block_wallclock(data: Data) -> str:
    """``benchmarks/results/wallclock.csv`` (``python -m benchmarks.bench_wallclock``): per env, each of ours beside
    its baseline after the same training seconds, and the training seconds each needed to reach the threshold, from
    the latest run holding both (runs are never mixed). With several seeds: mean returns (the last evaluation and the
    best one), mean steps, median seconds to the threshold (a seed that never reaches it counts as never)."""
    from benchmarks.bench_wallclock import median_seconds_to_threshold, read

    rows = read(data.results / "wallclock.csv")

    def cells(run: str, env_id: str, algo: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["run"] == run and r["env"] == env_id and r["algo"] == algo]

    def seconds_text(value: float) -> str:
        return f"{value:.1f}" if math.isfinite(value) else "never"

    body = []
    for env_id in dict.fromkeys(r["env"] for r in rows):
        for algo in [a for a in ORDER if a not in BASELINES]:
            base_algo = BASELINE_OF[algo]
            runs = [r["run"] for r in rows if r["env"] == env_id and r["algo"] == algo]
            run = max((r for r in set(runs) if cells(r, env_id, base_algo)), key=int, default=None)
            if run is None:
                continue
            ours, base = cells(run, env_id, algo), cells(run, env_id, base_algo)
            seeds = sorted({int(r["seed"]) for r in ours} & {int(r["seed"]) for r in base})
            ours = [r for r in ours if int(r["seed"]) in seeds]
            base = [r for r in base if int(r["seed"]) in seeds]
            a, b = median_seconds_to_threshold(ours), median_seconds_to_threshold(base)
            ratio = f"{a / b:.2f}" if math.isfinite(a) and math.isfinite(b) else "-"
            budget = statistics.fmean(float(r["seconds"]) for r in ours)
            body.append(
                [
                    env_id,
                    f"{DISPLAY[algo]} / {DISPLAY[base_algo]}",
                    run,
                    ", ".join(map(str, seeds)),
                    f"{budget:.0f}",
                    f"{statistics.fmean(float(r['final_return']) for r in ours):.1f} / "
                    f"{statistics.fmean(float(r['final_return']) for r in base):.1f}",
                    f"{statistics.fmean(float(r['best_return']) for r in ours):.1f} / "
                    f"{statistics.fmean(float(r['best_return']) for r in base):.1f}",
                    f"{statistics.fmean(int(r['steps']) for r in ours):,.0f} / "
                    f"{statistics.fmean(int(r['steps']) for r in base):,.0f}",
                    f"{seconds_text(a)} / {seconds_text(b)}",
                    ratio,
                ]
            )
    header = [
        "env",
        "ours / baseline",
        "run",
        "seeds",
        "training seconds",
        "return at those seconds",
        "best evaluation",
        "env steps done",
        "training seconds to the threshold",
        "seconds ratio",
    ]
    return "\n".join(markdown(header, body))


def block_paired(data: Data) -> str:
    from benchmarks.bench_paired import summarise

    body = []
    for name in ("paired_adaptive_kl_ppo.csv", "paired_adaptive_kl_ppo_large.csv"):
        rows = []
        for r in csv.DictReader((data.results / name).open()):
            rows.append({k: (float(v) if k not in ("env", "algo") else v) for k, v in r.items()})
            rows[-1]["round"] = int(rows[-1]["round"])
            rows[-1]["steps"] = int(rows[-1]["steps"])
        for e in summarise(rows, "adaptive_kl_ppo", "ppo"):
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


def block_instructions(data: Data) -> str:
    body = []
    for env, m in _instructions_per_iteration(data.results / "instructions_adaptive_kl_ppo.csv").items():
        ours, ppo = m["adaptive_kl_ppo"], m["ppo"]
        body.append([env, f"{ours / 1e6:,.1f}", f"{ppo / 1e6:,.1f}", f"{ppo / ours:.3f}"])
    lines = markdown(["env", "AdaptiveKLPPO (M instr / iteration)", "PPO (M instr / iteration)", "ratio"], body)
    rollouts = data.results / "instructions_adaptive_kl_ppo_rollouts.csv"
    if rollouts.exists():  # the same with train() skipped: both policies keep their initial weights
        for env, m in _instructions_per_iteration(rollouts).items():
            ours, ppo = m["adaptive_kl_ppo"], m["ppo"]
            lines += [
                "",
                f"{env}, rollout alone: {ours / 1e6:,.1f} against {ppo / 1e6:,.1f} M instructions, ratio {ppo / ours:.3f}.",
            ]
    return "\n".join(lines)


def block_soak(data: Data) -> str:
    rows = list(csv.DictReader((data.results / "soak.csv").open()))
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


ARITHMETIC = {
    "grpo_exact": "GRPO, exact match only",
    "grpo_shaped": "GRPO, exact match + format + length",
    "ppo_sparse": 'PPO, `reward_mode="sparse"` (exact match as env reward)',
    "ppo_shaped": 'PPO, `reward_mode="shaped"` (the three scores as env reward)',
}


def block_arithmetic(data: Data) -> str:
    result = json.loads((data.results / "arithmetic.json").read_text())
    body = []
    for config, label in ARITHMETIC.items():
        acc = np.array([r["accuracy"] for r in result["runs"] if r["config"] == config])
        body.append([label, f"{acc.mean():.2f} ± {acc.std():.2f}"])
    header = ["configuration", f"accuracy, mean ± std over {len(result['seeds'])} seeds"]
    return "\n".join(markdown(header, body))


def block_versions(data: Data) -> str:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for c in data.cells:
        sb3 = f"{c['stable_baselines3']} / {c['sb3_contrib']}"
        key = tuple(
            v or "not recorded" for v in (c["python"], c["torch"], sb3, c["gymnasium"], c["numpy"], c["mujoco"], c["cpu"])
        )
        groups[key].append(c)
    body = [[*key, provenance(cells)] for key, cells in sorted(groups.items(), key=lambda kv: min(c["date"] for c in kv[1]))]
    header = ["python", "torch", "SB3 / contrib", "gymnasium", "numpy", "mujoco", "CPU", "cells"]
    return "\n".join(markdown(header, body))


# ---- the GRPO design-choice studies (docs/guide/grpo_studies.md) ------------------------------------------------

#: The steps from plain GRPO to each zoo entry: (name, what the step adds).
LADDERS = {
    "HalfCheetah-v5": [
        ("grpo:hc_c", "per-step group baseline, groups of 4, no branching"),
        ("grpo:hc_b", "branching groups: every 100 steps from one member's state"),
        ("grpo:hc_g8", "groups of 8 (the zoo entry)"),
    ],
    "Hopper-v5": [
        ("grpo:hop_a", "per-step group baseline, gamma 0.99, branching, observation normalisation"),
        ("grpo:hop_n", "gamma 0.999, groups of 8, no branching, no normalisation"),
        ("grpo:hop_p", "learning rate 1e-3 decayed linearly"),
        ("grpo:hop_mg", "survival bonus discounted at 0.999, the rest of the reward at 0.97"),
        ("grpo:hop_mgent1", "entropy bonus 0.01"),
        ("grpo:hop_anneal", "noise bound: log std at most -1.5 falling to -4"),
        ("grpo:hop_antl15", "training episodes of 1500 steps (evaluation: 1000)"),
        ("grpo:hop_antl15g1lr5", "one group per rollout, learning rate 5e-4 (the zoo entry)"),
    ],
    "Pendulum-v1": [
        ("grpo:pend_ep20_lin2", "per-step group baseline, gamma 0.97, 20 epochs, learning rate 2e-3 decayed"),
        ("grpo:pend_sde4", "gSDE, new noise matrices every 4 steps"),
        ("grpo", "10 epochs (the zoo entry)"),
    ],
}
#: Identical configurations run on two machines.
RERUNS = [
    ("HalfCheetah-v5", "grpo:hc_g8", "grpo:hc_rerun11"),
    ("Hopper-v5", "grpo:hop_mgent1", "grpo:hop_rerun11"),
]


def _score(env: str, x: np.ndarray) -> str:
    text = f"{x.mean():.1f} ± {x.std():.1f}" if len(x) > 1 else f"{x[0]:.1f}"
    if env == "Hopper-v5":
        text += f", {int((x >= 1000).sum())} of {len(x)} above 1000, median {np.median(x):.1f}"
    return text


def block_ladder(data: Data, env: str) -> str:
    """Each step toward the zoo entry against the step before it, on the seeds both ran."""
    rows, used, previous = [], [], None
    for name, what in LADDERS[env]:
        finals = data.finals(env, name)
        used += data.cells_of(env, name)
        x = np.array(list(finals.values()))
        cols = [
            f"`{name}`",
            what,
            change(hyperparams_of(data, env, previous), hyperparams_of(data, env, name)) if previous else "",
        ]
        cols += [f"{len(x)}: {seed_list(finals)}", _score(env, x)]
        if previous is not None:
            before = data.finals(env, previous)
            common = sorted(set(finals) & set(before))
            if common:
                a = np.array([finals[s] for s in common])
                b = np.array([before[s] for s in common])
                if env == "Hopper-v5":
                    cols.append(f"{int((a >= 1000).sum())} vs {int((b >= 1000).sum())} of {len(common)} above 1000")
                else:
                    cols.append(f"{a.mean() - b.mean():+.1f} over {len(common)} seed{'s' if len(common) > 1 else ''}")
            else:
                cols.append("no common seeds")
        else:
            cols.append("")
        rows.append(cols)
        previous = name
    header = ["cells", "step", "change from the step before", "seeds", "final eval", "against the step before, same seeds"]
    lines = markdown(header, rows)
    lines += ["", f"{provenance(used)}."]
    return "\n".join(lines)


def variants_of(data: Data, env: str, min_seeds: int, budget: int = 300_000) -> list[str]:
    ladder = {n for n, _ in LADDERS.get(env, [])}
    reruns = {n for e, a, b in RERUNS if e == env for n in (a, b)}
    return sorted(
        name
        for (e, name), cells in data.by.items()
        if e == env
        and name.startswith("grpo:")
        and name not in ladder | reruns
        and "@" not in name
        and len(cells) >= min_seeds
        and next(iter(cells.values()))["budget"] == budget
    )


def block_variants(data: Data, env: str, min_seeds: int = 3) -> str:
    """Every variant with at least ``min_seeds`` seeds against the ladder step it differs least from, on common seeds."""
    ladder = [n for n, _ in LADDERS[env]]
    position = {n: i for i, n in enumerate(ladder)}
    for e, first, rerun in RERUNS:  # a rerun stands where its configuration stands
        if e == env:
            position[rerun] = position.get(first, -1)
    rows, used = [], []
    for name in variants_of(data, env, min_seeds):
        hp = flatten(hyperparams_of(data, env, name))
        cpus = {s: c["cpu"] for s, c in data.by[(env, name)].items()}

        def distance(base: str, hp: dict = hp, cpus: dict = cpus) -> tuple[int, int, int]:
            other = flatten(hyperparams_of(data, env, base))
            same_machine = sum(1 for s, c in data.by[(env, base)].items() if s in cpus and c["cpu"] == cpus[s])
            return (sum(hp.get(k) != other.get(k) for k in set(hp) | set(other)), -position[base], -same_machine)

        # the configuration it differs least from (the later step on a tie); of two runs of one configuration, the one
        # with more seeds on the variant's machine
        base = min(position, key=distance)
        finals, before = data.finals(env, name), data.finals(env, base)
        common = sorted(set(finals) & set(before))
        used += data.cells_of(env, name)
        x = np.array(list(finals.values()))
        a = np.array([finals[s] for s in common])
        b = np.array([before[s] for s in common])
        if env == "Hopper-v5":
            against = f"{int((a >= 1000).sum())} vs {int((b >= 1000).sum())} of {len(common)}"
            key = (a >= 1000).mean() - (b >= 1000).mean() if common else -np.inf
        else:
            against = f"{a.mean() - b.mean():+.1f} over {len(common)}" if common else "-"
            key = a.mean() - b.mean() if common else -np.inf
        label = name.split(":", 1)[1]
        rows.append(
            (
                key,
                [
                    f"`{label}`",
                    f"`{base.split(':', 1)[1]}`",
                    change(hyperparams_of(data, env, base), hyperparams_of(data, env, name)),
                    str(len(x)),
                    _score(env, x),
                    against,
                ],
            )
        )
    rows.sort(key=lambda r: -r[0])
    what = "above 1000, variant vs base, same seeds" if env == "Hopper-v5" else "mean difference to the base, same seeds"
    lines = markdown(["variant", "base", "change from the base", "seeds", "final eval", what], [r for _, r in rows])
    lines += ["", f"{provenance(used)}."]
    return "\n".join(lines)


def block_reruns(data: Data) -> str:
    rows, used = [], []
    for env, a, b in RERUNS:
        fa, fb = data.finals(env, a), data.finals(env, b)
        common = sorted(set(fa) & set(fb))
        x, y = np.array([fa[s] for s in common]), np.array([fb[s] for s in common])
        used += data.cells_of(env, a, common) + data.cells_of(env, b, common)
        same = int(np.sum(np.isclose(x, y, rtol=0, atol=1e-6)))
        ca = {c["cpu"] or "not recorded" for c in data.cells_of(env, a, common)}
        cb = {c["cpu"] or "not recorded" for c in data.cells_of(env, b, common)}
        rows.append(
            [
                env,
                f"`{a.split(':')[1]}` ({', '.join(sorted(ca))})",
                f"`{b.split(':')[1]}` ({', '.join(sorted(cb))})",
                seed_list(common),
                _score(env, x),
                _score(env, y),
                f"{same} of {len(common)}",
                f"{np.abs(x - y).mean():.1f}",
            ]
        )
    header = [
        "env",
        "first run (CPU)",
        "rerun (CPU)",
        "seeds",
        "first run",
        "rerun",
        "identical finals",
        "mean abs. difference",
    ]
    return "\n".join([*markdown(header, rows), "", f"{provenance(used)}."])


PENDULUM_SPEED = ["grpo", "grpo:pend_sde4", "grpo:pend_sde4_lr1", "grpo:pend_ep20_lin2", "ppo"]
SPEED_STEPS = (20_000, 30_000, 50_000, 100_000, 150_000)


def block_pendulum_speed(data: Data) -> str:
    """Mean evaluation over seeds 0-4 at a few points of the run (the first evaluation at or after each)."""
    rows, used = [], []
    for name in PENDULUM_SPEED:
        cells = data.cells_of("Pendulum-v1", name, CLASSIC_SEEDS)
        used += cells
        cols = [display(name) if name in ("grpo", "ppo") else f"`{name.split(':')[1]}`"]
        for t in SPEED_STEPS:
            values = []
            for c in cells:
                curve = data.curves[(name, "Pendulum-v1", c["seed"])]
                values.append(curve[np.searchsorted(curve[:, 0], t), 1])
            cols.append(f"{np.mean(values):.0f}")
        finals = np.array([c["final_eval"] for c in cells])
        cols.append(f"{finals.mean():.1f} ± {finals.std():.1f}")
        rows.append(cols)
    header = ["cells", *(budget_label(t) for t in SPEED_STEPS), "final (300k)"]
    return "\n".join([*markdown(header, rows), "", f"{provenance(used)}."])


#: Short episodes: each variant against the zoo entry on the seeds both ran.
CLASSIC_VARIANTS = [
    ("CartPole-v1", "grpo:cart_zscore", "grpo"),
    ("CartPole-v1", "grpo:default", "grpo"),
    ("Pendulum-v1", "grpo:default", "grpo"),
    ("CartPole-v1", "grpo:branch_carry", "grpo"),
    ("CartPole-v1", "grpo:branch_classic", "grpo"),
    ("Acrobot-v1", "grpo:acro_step", "grpo"),
    ("Acrobot-v1", "grpo:acro_step_g1", "grpo"),
    ("Acrobot-v1", "grpo:branch_carry", "grpo"),
    ("Acrobot-v1", "grpo:branch_classic", "grpo"),
    ("Pendulum-v1", "grpo:branch", "grpo"),
    ("Pendulum-v1", "grpo:branch_carry", "grpo"),
]


def block_classic_variants(data: Data) -> str:
    rows, used = [], []
    for env, name, base in CLASSIC_VARIANTS:
        finals, before = data.finals(env, name), data.finals(env, base)
        common = sorted(set(finals) & set(before))
        used += data.cells_of(env, name)
        x = np.array(list(finals.values()))
        diff = np.mean([finals[s] - before[s] for s in common])
        rows.append(
            [
                env,
                f"`{name.split(':')[1]}`",
                "the `default` entry: GRPO's constructor defaults"
                if name.endswith(":default")
                else change(hyperparams_of(data, env, base), hyperparams_of(data, env, name)),
                f"{budget_label(next(iter(data.by[(env, name)].values()))['budget'])}",
                f"{len(x)}: {seed_list(finals)}",
                f"{x.mean():.1f} ± {x.std():.1f}",
                f"{diff:+.1f}",
            ]
        )
    header = ["env", "variant", "change from the zoo entry", "budget", "seeds", "final eval", "minus the entry, same seeds"]
    return "\n".join([*markdown(header, rows), "", f"{provenance(used)}."])


BLOCKS: dict[str, Callable[[Data], str]] = {
    "overview": block_overview,
    "headline": block_headline,
    "classic": block_classic,
    "large": block_large,
    "grpo_vs_ppo": block_grpo_vs_ppo,
    "throughput": block_throughput,
    "wallclock": block_wallclock,
    "paired": block_paired,
    "instructions": block_instructions,
    "soak": block_soak,
    "arithmetic": block_arithmetic,
    "versions": block_versions,
    "ladder_halfcheetah": lambda d: block_ladder(d, "HalfCheetah-v5"),
    "ladder_hopper": lambda d: block_ladder(d, "Hopper-v5"),
    "ladder_pendulum": lambda d: block_ladder(d, "Pendulum-v1"),
    "variants_halfcheetah": lambda d: block_variants(d, "HalfCheetah-v5"),
    "variants_hopper": lambda d: block_variants(d, "Hopper-v5"),
    "reruns": block_reruns,
    "pendulum_speed": block_pendulum_speed,
    "classic_variants": block_classic_variants,
}
_BLOCK = re.compile(r"(<!-- aggregate: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /aggregate -->)", re.S)


def render(text: str, data: Data, cache: dict[str, str] | None = None) -> str:
    """``text`` with every generated block rebuilt from ``data``."""
    cache = {} if cache is None else cache

    def build(match: re.Match) -> str:
        name = match["name"]
        if name not in BLOCKS:
            raise SystemExit(f"unknown generated block {name!r}; known: {sorted(BLOCKS)}")
        if name not in cache:
            cache[name] = BLOCKS[name](data)
        return f"{match[1]}{cache[name]}\n{match[4]}"

    return _BLOCK.sub(build, text)


def update_pages(data: Data, pages: Iterable[Path], check: bool) -> list[Path]:
    """Rewrite (or with ``check``, only compare) the generated blocks of ``pages``; returns the pages that differ."""
    stale, cache = [], {}
    for page in pages:
        if not page.exists():
            continue
        text = page.read_text()
        new = render(text, data, cache)
        if new != text:
            stale.append(page)
            if not check:
                page.write_text(new)
    return stale


# ---- plots ------------------------------------------------------------------------------------------------------


def plot_curves(data: Data, rows: list[tuple[str, list[tuple[str, Iterable[int] | None]]]], path: Path) -> None:
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    palette = {a: plt.cm.tab10(i) for i, a in enumerate(ORDER)}

    def color(name: str) -> Any:
        return palette.get(name.split("@")[0].split(":")[0], "grey")

    fig, axes = plt.subplots(1, len(rows), figsize=(5 * len(rows), 3.6), squeeze=False)
    for ax, (env, entries) in zip(axes[0], rows, strict=True):
        for name, seeds in entries:
            runs = [data.curves[(name, env, c["seed"])] for c in data.cells_of(env, name, seeds)]
            if not runs:
                continue
            grid = np.linspace(max(r[0, 0] for r in runs), min(r[-1, 0] for r in runs), 60)
            ys = np.stack([np.interp(grid, r[:, 0], r[:, 1]) for r in runs])
            label = f"{display(name)}, {budget_label(data.cells_of(env, name)[0]['budget'])} ({len(runs)})"
            style = "--" if "@" in name else "-"  # the same algorithm at a second budget
            ax.plot(grid, ys.mean(0), label=label, color=color(name), ls=style)
            if len(runs) > 1:
                band = np.array([bootstrap_ci(ys[:, j], stat="mean", reps=300) for j in range(len(grid))])
                ax.fill_between(grid, band[:, 0], band[:, 1], color=color(name), alpha=0.2)
        ax.axhline(THRESHOLDS[env], color="grey", ls=":", lw=1)
        ax.set_title(env)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1000:.0f}k"))
        ax.set_xlabel("env steps")
        ax.set_ylabel("eval return")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_headline(data: Data, path: Path) -> None:
    import matplotlib.pyplot as plt

    labels, points, errors, colors = [], [], [], []
    palette = {a: plt.cm.tab10(i) for i, a in enumerate(ORDER)}
    for ours, base, what, _, scores, _ in headline_scores(data):
        for key in (ours, base):
            point = iqm(np.concatenate(scores[key]))
            lo, hi = bootstrap_ci(scores[key])
            labels.append(f"{DISPLAY[key]} ({what})")
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


def plot_throughput(data: Data, path: Path) -> None:
    import matplotlib.pyplot as plt

    rows = [r for r in csv.DictReader((data.results / "throughput.csv").open()) if r["algo"] not in ("ppo", "trpo")]
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


def plots(data: Data, out: Path) -> list[Path]:
    """The plots of BENCHMARKS.md; ``[]`` (and a note) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print("matplotlib is not installed: plots skipped (pip install -e '.[bench]')", file=sys.stderr)
        return []
    out.mkdir(parents=True, exist_ok=True)
    classic = [(env, [(n, CLASSIC_SEEDS) for n in ORDER]) for env in CLASSIC]
    large = []
    for env in LARGE:
        entries: list[tuple[str, Iterable[int] | None]] = [(n, None) for n in ORDER if n != "grpo" or env not in GRPO_ENTRY]
        if env in GRPO_ENTRY:
            entries = [(GRPO_ENTRY[env], None), ("ppo@300k", None), *entries]
        large.append((env, entries))
    written = [out / "curves_classic.png", out / "curves_mujoco.png", out / "headline.png", out / "throughput.png"]
    plot_curves(data, classic, written[0])
    plot_curves(data, large, written[1])
    plot_headline(data, written[2])
    plot_throughput(data, written[3])
    return written


# ---- command line -----------------------------------------------------------------------------------------------


def summary_table(data: Data, envs, algos, seeds) -> str:
    """A per-env table of any selection of cells (``--summary``)."""
    chosen = select(data.cells, envs, algos, seeds)
    pairs = list(dict.fromkeys((s["env"], s["algo"]) for s in sorted(chosen, key=lambda s: (s["env"], s["algo"]))))
    return per_env_table(data, [(env, name, seeds) for env, name in pairs])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=str(RESULTS), help="the folder of the data files")
    parser.add_argument("--table", help="the folder of cells.csv.gz and curves.csv.gz (default: --results)")
    parser.add_argument("--pages", nargs="*", default=[str(p) for p in PAGES], help="pages with generated blocks")
    parser.add_argument("--check", action="store_true", help="only check that the pages' generated blocks are current")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--plots", default=None, help="folder of the plots (default: --results)")
    parser.add_argument(
        "--summary", help="print a per-env table of the selected cells (and write it to this file; - for none)"
    )
    parser.add_argument("--envs", nargs="+")
    parser.add_argument("--algos", nargs="+", help="names: grpo, grpo:hc_g8, ppo@300k, ...")
    parser.add_argument("--seeds", nargs="+", type=int)
    args = parser.parse_args(argv)
    results = Path(args.results)
    cells_dir = Path(args.table or results)
    cells, curves = load(cells_dir / table.CELLS.name, cells_dir / table.CURVES.name)
    if not cells:
        raise SystemExit(f"no cells in {cells_dir / table.CELLS.name}")
    data = Data(cells, curves, results)
    if args.summary:
        text = summary_table(data, args.envs, args.algos, args.seeds)
        if args.summary != "-":
            Path(args.summary).write_text(text + "\n")
        print(text)
        return
    stale = update_pages(data, [Path(p) for p in args.pages], check=args.check)
    if args.check:
        if stale:
            names = ", ".join(str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in stale)
            raise SystemExit(f"generated tables are out of date in {names}: run python -m benchmarks.aggregate")
        print("generated tables are up to date")
        return
    for page in stale:
        print(f"updated {page}")
    if not args.no_plots:
        for path in plots(data, Path(args.plots or results)):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
