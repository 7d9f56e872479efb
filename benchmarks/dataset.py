"""
The cells as the aggregate reads them (names, selection, per-env lookup), what it shows of them (``aggregate.yml``:
entry and sweep names, display names, env groups) and the formatting its tables share.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import yaml

from benchmarks import table

#: What the aggregate shows, and how: benchmarks/aggregate.yml.
SPEC_FILE = Path(__file__).with_name("aggregate.yml")
SPEC: dict[str, Any] = yaml.safe_load(SPEC_FILE.read_text())

ORDER: list[str] = SPEC["order"]
DISPLAY: dict[str, str] = SPEC["display"]
NORMALISATION: dict[str, tuple[float, float]] = {env: tuple(v) for env, v in SPEC["normalisation"].items()}
CLASSIC: tuple[str, ...] = tuple(SPEC["classic"])
LARGE: tuple[str, ...] = tuple(SPEC["large"])
CLASSIC_SEEDS: tuple[int, ...] = tuple(SPEC["classic_seeds"])
#: Final returns at or above this count on these envs (Hopper: standing the whole episode).
COUNT_ABOVE: dict[str, float] = SPEC["count_above"]


class EntryChange(NamedTuple):
    """A zoo entry changed after rows of it ran (``aggregate.yml``'s ``entry_changes``)."""

    #: The sweep whose file is the new entry: its cells are the entry's, named as the algorithm.
    variant: str
    #: The commit that changed the entry (12 digits).
    commit: str
    #: The name of the algorithm's own cells and ``bench_wallclock`` rows that ran before ``commit``.
    earlier: str


def _entry_changes(items: list[dict[str, str]]) -> dict[tuple[str, str], EntryChange]:
    changes: dict[tuple[str, str], EntryChange] = {}
    for c in items:
        key = (c["algo"], c["env"])
        if key in changes:
            raise ValueError(f"aggregate.yml: two entry_changes for {c['algo']} on {c['env']}; keep the latest")
        changes[key] = EntryChange(c["variant"], str(c["commit"]), c.get("earlier", f"{c['algo']}:previous"))
    return changes


#: Zoo entries changed after their cells ran: (algorithm, env) -> the change.
ENTRY_CHANGES: dict[tuple[str, str], EntryChange] = _entry_changes(SPEC["entry_changes"])


# ---- data -------------------------------------------------------------------------------------------------------


def budget_label(budget: int) -> str:
    return f"{budget // 1000}k" if budget % 1000 == 0 else str(budget)


def entry_name(label: str, env: str, commit: str) -> str:
    """The name of a cell, or a ``bench_wallclock`` row, labelled ``label`` on ``env`` that ran at ``commit`` (see
    :data:`ENTRY_CHANGES`): where the algorithm's entry changed, the sweep variant that is the new entry and the
    algorithm's own runs from the commit of the change on are the algorithm's (``grpo``), its runs from before it the
    earlier entry's (``grpo:previous``). A run records its commit and its configuration; a ``bench_wallclock`` row only
    its commit."""
    algo = label.partition(":")[0]
    change = ENTRY_CHANGES.get((algo, env))
    if change is None or label not in (algo, change.variant):
        return label
    if label == change.variant:
        return algo
    history = _history()
    ran, changed = commit.split("+")[0][:12], change.commit[:12]
    if ran not in history or changed not in history:
        raise ValueError(
            f"{label} on {env}: whether its run at commit {commit} ran the entry changed at {change.commit} needs both "
            "commits in the git history; run the aggregate in a full clone"
        )
    return change.earlier if history[ran] < history[changed] else algo


def read_wallclock(results: Path, curves: Path | None = None) -> tuple[list[dict], list[dict]]:
    """``bench_wallclock``'s rows (``wallclock.csv``) and the evaluations along them (``wallclock_curves.csv``), each
    algorithm named by :func:`entry_name`."""
    from benchmarks.bench_wallclock import read

    rows, points = read(results), read(curves) if curves is not None else []
    names = {}
    for r in rows:
        name = entry_name(r["algo"], r["env"], r["commit"])
        names[(r["run"], r["env"], r["algo"], r["seed"])] = name
        r["algo"] = name
    for p in points:
        p["algo"] = names.get((p["run"], p["env"], p["algo"], p["seed"]), p["algo"])
    return rows, points


def load(cells: Path = table.CELLS, curves: Path | None = table.CURVES) -> tuple[list[dict], dict[tuple, np.ndarray]]:
    """Every cell of the table (``algo`` = its name: ``grpo``, ``grpo:hc_g8``, ``ppo@300k``) and every curve
    (``(name, env, seed)`` -> rows of timesteps, eval mean, eval std, train seconds, RSS). Where one configuration ran
    at several budgets on an env, the cells of the smallest keep its name and the others become ``<name>@<budget>``:
    rows never mix budgets."""
    rows = table.read_cells(cells)
    names = [entry_name(table.cell_label(r), r["env"], r["commit"]) for r in rows]
    smallest: dict[tuple[str, str], int] = {}
    for r, name in zip(rows, names, strict=True):
        smallest[(r["env"], name)] = min(smallest.get((r["env"], name), r["budget"]), r["budget"])
    summaries = []
    for r, name in zip(rows, names, strict=True):
        if r["budget"] != smallest[(r["env"], name)]:
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


def no_cells(names: str, where: str, there: Iterable[str]) -> str:
    """The message for names that no cell has: the names there instead, and how a name is formed."""
    return (
        f"no cells named {names} on {where}; the names there: {', '.join(sorted(set(there))) or 'none'} "
        "(an algorithm's smallest budget on an env has no suffix, a larger one is <name>@<budget>, e.g. ppo@1000k)"
    )


@dataclass
class Data:
    cells: list[dict]
    curves: dict[tuple, np.ndarray]
    results: Path
    by: dict[tuple[str, str], dict[int, dict]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for s in self.cells:
            self.by.setdefault((s["env"], s["algo"]), {})[s["seed"]] = s

    def named(self, env: str, name: str) -> dict[int, dict]:
        """The cells of ``name`` on ``env`` by seed, for a name a spec gives: one with no cell there is an error that
        lists the names there (``finals`` and ``cells_of`` give nothing for it, as for an algorithm that has not run)."""
        if (env, name) not in self.by:
            raise KeyError(no_cells(repr(name), env, (n for e, n in self.by if e == env)))
        return self.by[(env, name)]

    def finals(self, env: str, name: str, seeds: Iterable[int] | None = None) -> dict[int, float]:
        cells = self.by.get((env, name), {})
        return {k: c["final_eval"] for k, c in sorted(cells.items()) if seeds is None or k in seeds}

    def cells_of(self, env: str, name: str, seeds: Iterable[int] | None = None) -> list[dict]:
        cells = self.by.get((env, name), {})
        return [c for k, c in sorted(cells.items()) if seeds is None or k in seeds]

    def paired(self, env: str, a: str, b: str) -> Paired:
        """Two names a spec gives (each must have cells on ``env``) on the seeds both ran, in seed order."""
        self.named(env, a)
        self.named(env, b)
        fa, fb = self.finals(env, a), self.finals(env, b)
        seeds = sorted(set(fa) & set(fb))
        x, y = np.array([fa[s] for s in seeds]), np.array([fb[s] for s in seeds])
        return Paired(seeds, x, y, self.cells_of(env, a, seeds), self.cells_of(env, b, seeds))


class Paired(NamedTuple):
    """Two names' cells on one env, on the seeds both ran (:meth:`Data.paired`)."""

    seeds: list[int]
    x: np.ndarray  # the first name's final evaluations, in seed order
    y: np.ndarray  # the second's
    cells_x: list[dict]
    cells_y: list[dict]


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


@functools.cache
def _history() -> dict[str, int]:
    """Short commit hash (12 digits) -> its position in this checkout's history, oldest 0 (``{}`` outside git)."""
    try:
        out = subprocess.run(
            ["git", "log", "--reverse", "--format=%h", "--abbrev=12"],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {commit: i for i, commit in enumerate(out.split())}


def when_run(cells: Iterable[dict]) -> tuple[str, str]:
    """The dates the cells ran (``2026-11-23`` or ``2026-11-23 to 2026-11-25``) and the newest commit among them (by
    date, then by its place in the history: several commits share a date)."""
    cells = list(cells)
    dates = sorted({c["date"] for c in cells if c["date"]})
    history = _history()

    def when(c: dict) -> tuple[str, int, str]:
        return c["date"], history.get(c["commit"].split("+")[0][:12], -1), c["commit"]

    newest = max(cells, key=when)["commit"] if any(c["commit"] for c in cells) else "-"
    return (dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"), newest


def provenance(cells: Iterable[dict]) -> str:
    """When and on which commits the cells ran: the dates and the newest commit."""
    cells = list(cells)
    commits = {c["commit"] for c in cells if c["commit"]}
    span, newest = when_run(cells)
    return f"{len(cells)} cells run {span}, {len(commits)} commit{'s' if len(commits) != 1 else ''} (newest {newest})"


def tag(name: str) -> str:
    """The configuration a name shows beside its algorithm: the sweep variant, ``""`` for a zoo entry's cells."""
    return name.split("@")[0].partition(":")[2]


def display(name: str) -> str:
    algo = name.split("@")[0].partition(":")[0]
    label = DISPLAY.get(algo, algo)
    return f"{label} `{tag(name)}`" if tag(name) else label


def markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


# ---- hyperparameter differences ---------------------------------------------------------------------------------


class _Module:
    def __getattr__(self, name: str) -> str:
        return f"nn.{name}"


#: The rl-zoo ``callback`` of a zoo entry that changes its arguments partway (the harness's ``switch``).
SWITCH_CALLBACK = "sb3_grpo.SwitchArguments"


def as_switch(entry: dict[str, Any]) -> dict[str, Any]:
    """A zoo entry whose ``callback`` is one ``sb3_grpo.SwitchArguments`` (``{at: <steps>, arguments: {...}}``) with
    that callback written as the harness's ``switch: {at, set: arguments, schedules: budget}``, which trains the same
    (one ``learn`` whose schedules run over the whole budget, the arguments changed at ``at`` steps); any other entry
    as it is."""
    callbacks = entry.get("callback")
    if not (isinstance(callbacks, list) and len(callbacks) == 1 and isinstance(callbacks[0], dict)):
        return entry
    (name, kwargs), *_ = callbacks[0].items()
    if name != SWITCH_CALLBACK or set(kwargs or {}) - {"at", "arguments"}:
        return entry
    out = {key: value for key, value in entry.items() if key != "callback"}
    out["switch"] = {"at": kwargs["at"], "set": dict(kwargs.get("arguments") or {}), "schedules": "budget"}
    return out


def flatten(hp: dict[str, Any]) -> dict[str, Any]:
    """A zoo entry as flat ``key -> value`` (``policy_kwargs`` and ``normalize`` strings parsed, nested dicts dotted;
    ``normalize: false`` and ``policy`` dropped, as they change nothing; a ``SwitchArguments`` callback as the
    harness's ``switch``, :func:`as_switch`)."""
    out: dict[str, Any] = {}
    hp = as_switch(hp)

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
