"""
The benchmark results as data: one row per finished cell, plus every cell's learning curve.

- ``benchmarks/results/cells.csv.gz``: one row per (algo, variant, env, seed, budget) cell, columns ``CELL_COLUMNS``:
  final and best evaluation, steps and training seconds to the env's threshold, fps, update time, memory, the
  versions it ran with, the date and commit, the hyperparameters (the zoo or sweep entry, as JSON) and ``defaults``
  (the constructor arguments the entry left out, with the defaults they had; JSON, empty for the cells run before
  2026-11-27, when it was added). ``kernels`` (the kernels numpy's OpenBLAS and torch chose for the CPU, as
  ``"openblas SkylakeX, 1 thread; torch AVX512"``) is empty for the cells run before 2026-11-29.
- ``benchmarks/results/curves.csv.gz``: the evaluation curves, one row per evaluation, columns ``CURVE_COLUMNS``.

``variant`` is empty for the zoo entry of ``algo`` (``zoo_configs/<algo>.yml`` for ours, rl-zoo's for ``ppo`` and
``trpo``), ``default`` for that file's ``default`` entry scored on any env, else the tag of a sweep file
(``benchmarks/sweeps/<algo>_<variant>.yml``) or of a configuration tried and since retired (its hyperparameters are
in the row). ``commit`` is the commit the cell ran on; for cells older than this table, the commit that first
recorded it. Both files are rewritten sorted, gzip without timestamps, so that the same cells give the same bytes.

    python -m benchmarks.table                      # what the table holds, per env and algorithm
    python -m benchmarks.table --import DIR         # add the finished cells of a harness working directory
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CELLS = RESULTS / "cells.csv.gz"
CURVES = RESULTS / "curves.csv.gz"

KEY = ("algo", "variant", "env", "seed", "budget")
VERSION_COLUMNS = (
    "python",
    "torch",
    "stable_baselines3",
    "sb3_contrib",
    "gymnasium",
    "numpy",
    "mujoco",
    "box2d",
    "machine",
    "cpu",
    "kernels",
)
CELL_COLUMNS = (
    *KEY,
    "final_eval",
    "best_eval",
    "steps_to_threshold",
    "seconds_to_threshold",
    "train_seconds",
    "fps",
    "update_ms",
    "n_updates",
    "rss_start_mb",
    "peak_rss_mb",
    "used_step_fraction",
    *VERSION_COLUMNS,
    "date",
    "commit",
    "hyperparams",
    "defaults",
)
#: Columns added after the table began: a file written before one was added reads with it empty.
ADDED_COLUMNS = ("defaults", "kernels")
CURVE_COLUMNS = (*KEY, "timesteps", "eval_mean", "eval_std", "train_seconds", "rss_mb")
_INTS = {"seed", "budget", "steps_to_threshold", "n_updates", "timesteps"}
_STRINGS = {"algo", "variant", "env", "date", "commit", "hyperparams", "defaults", *VERSION_COLUMNS}


def split_name(name: str) -> tuple[str, str]:
    """``"grpo:hc_g8"`` -> ``("grpo", "hc_g8")``; ``"ppo"`` -> ``("ppo", "")``."""
    algo, _, variant = name.partition(":")
    return algo, variant


def cell_label(row: dict[str, Any]) -> str:
    """The harness's name of a row's configuration: ``algo`` or ``algo:variant``."""
    return f"{row['algo']}:{row['variant']}" if row["variant"] else row["algo"]


def _parse(column: str, text: str) -> Any:
    if column in _STRINGS:
        return text
    if text == "":
        return None
    return int(text) if column in _INTS else float(text)


def _format(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def added_columns_missing(found: tuple[str, ...], columns: tuple[str, ...], added: tuple[str, ...]) -> set[str] | None:
    """The columns of ``added`` that a file written before they were added lacks (empty when it has them all), or
    ``None`` when its columns ``found`` are not ``columns``, in order, less some of ``added``."""
    missing = set(columns) - set(found)
    if tuple(found) != tuple(c for c in columns if c not in missing) or not missing <= set(added):
        return None
    return missing


def read(path: Path, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows of a table file (``[]`` when it does not exist yet)."""
    if not path.exists():
        return []
    with gzip.open(path, "rt", newline="") as f:
        reader = csv.DictReader(f)
        if added_columns_missing(tuple(reader.fieldnames or ()), columns, ADDED_COLUMNS) is None:
            raise ValueError(f"{path}: columns {reader.fieldnames} are not the expected {list(columns)}")
        return [{c: _parse(c, row.get(c, "")) for c in columns} for row in reader]


def write(path: Path, columns: tuple[str, ...], rows: Iterable[dict[str, Any]]) -> None:
    """Write rows sorted by ``KEY`` (then timesteps), as gzip without a timestamp: same rows, same bytes."""
    order = [*KEY, "timesteps"] if "timesteps" in columns else list(KEY)
    rows = sorted(rows, key=lambda r: tuple(r[c] for c in order))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_format(row.get(c)) for c in columns])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
        f.write(buffer.getvalue().encode())


def read_cells(path: Path = CELLS) -> list[dict[str, Any]]:
    return read(path, CELL_COLUMNS)


def read_curves(path: Path = CURVES) -> list[dict[str, Any]]:
    return read(path, CURVE_COLUMNS)


def cell_row(summary: dict[str, Any]) -> dict[str, Any]:
    """A table row from the summary the harness writes for a cell (``<cell>.json``)."""
    algo, variant = split_name(summary["algo"])
    row = {c: summary.get(c) for c in CELL_COLUMNS}
    row.update(algo=algo, variant=variant, seed=int(summary["seed"]), budget=int(summary["budget"]))
    row.update({c: str((summary.get("versions") or {}).get(c, "")) for c in VERSION_COLUMNS})
    row["hyperparams"] = json.dumps(summary.get("hyperparams") or {}, sort_keys=True)
    row["defaults"] = json.dumps(summary["defaults"], sort_keys=True) if "defaults" in summary else ""
    row["date"] = summary.get("date") or ""
    row["commit"] = summary.get("commit") or ""
    return row


def curve_rows(row: dict[str, Any], curve_csv: Path) -> list[dict[str, Any]]:
    """The curve rows of one cell from its harness curve file (``<cell>.csv``)."""
    with open(curve_csv, newline="") as f:
        return [
            {
                **{k: row[k] for k in KEY},
                "timesteps": int(float(r["timesteps"])),
                "eval_mean": round(float(r["eval_mean"]), 4),
                "eval_std": round(float(r["eval_std"]), 4),
                "train_seconds": round(float(r["train_seconds"]), 3),
                "rss_mb": round(float(r["rss_mb"]), 1),
            }
            for r in csv.DictReader(f)
        ]


def add(
    summaries: list[tuple[dict[str, Any], Path | None]], cells_path: Path = CELLS, curves_path: Path = CURVES
) -> tuple[int, int]:
    """Add finished cells (their harness summary and curve file) to the table. A cell already in the table is left
    as it is: a cell is run once. Returns (added, already there).

    The table is read and written under a lock (``.table.lock`` beside it), so that harness invocations side by side
    that finish together each add their cells instead of writing over the other's.
    """
    cells_path.parent.mkdir(parents=True, exist_ok=True)
    with open(cells_path.parent / ".table.lock", "a") as f:
        lock(f)
        return _add(summaries, cells_path, curves_path)


def lock(f: Any) -> None:
    """Hold an exclusive lock on the open file ``f`` until it is closed (``fcntl``; no lock on Windows), for the
    results tables that runs side by side write to."""
    if sys.platform != "win32":
        import fcntl

        fcntl.flock(f, fcntl.LOCK_EX)


def _add(summaries: list[tuple[dict[str, Any], Path | None]], cells_path: Path, curves_path: Path) -> tuple[int, int]:
    cells = read_cells(cells_path)
    curves = read_curves(curves_path)
    present = {tuple(r[k] for k in KEY) for r in cells}
    added = 0
    for summary, curve_csv in summaries:
        row = cell_row(summary)
        key = tuple(row[k] for k in KEY)
        if key in present:
            continue
        present.add(key)
        cells.append(row)
        if curve_csv is not None and curve_csv.exists():
            curves += curve_rows(row, curve_csv)
        added += 1
    if added:
        write(cells_path, CELL_COLUMNS, cells)
        write(curves_path, CURVE_COLUMNS, curves)
    return added, len(summaries) - added


def import_directory(directory: Path, cells_path: Path = CELLS, curves_path: Path = CURVES) -> tuple[int, int]:
    """Add every finished cell of a harness working directory (``*.json`` summaries and their ``*.csv`` curves)."""
    found = [(json.loads(p.read_text()), p.with_suffix(".csv")) for p in sorted(Path(directory).glob("*.json"))]
    return add(found, cells_path, curves_path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--import", dest="directory", help="add the finished cells of this harness working directory")
    parser.add_argument("--cells", default=str(CELLS))
    parser.add_argument("--curves", default=str(CURVES))
    args = parser.parse_args(argv)
    if args.directory:
        added, known = import_directory(Path(args.directory), Path(args.cells), Path(args.curves))
        print(f"{added} cells added, {known} already in the table")
    cells = read_cells(Path(args.cells))
    counts = Counter((r["env"], cell_label(r), r["budget"]) for r in cells)
    for (env, label, budget), n in sorted(counts.items()):
        print(f"{env:16s} {label:28s} {budget:>9,d}  {n:3d} seeds")
    print(f"{len(cells)} cells")


if __name__ == "__main__":
    main()
