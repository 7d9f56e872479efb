"""
Every sweep variant of one env in one table, each against a reference configuration on the same seeds.

    python -m benchmarks.sweep_table --env Hopper-v5 --entry grpo:hop_antl15g1lr5 --threshold 1000
    python -m benchmarks.sweep_table --env HalfCheetah-v5 --entry grpo:hc_rerun11 --reference ppo

One row per configuration with cells at ``--budget`` in the results table (``grpo:<tag>`` variants, ``--entry`` and
``--reference``): its seeds, final evaluation (mean +- std, median), how many seeds reach ``--threshold``, then the
entry's cells on the same seeds and the paired difference (variant minus entry, mean over the common seeds). Prints
the table (``--out`` also writes it). Every variant ever run is a row, retired ones included; the concise study is
docs/guide/grpo_studies.md. Cells are bit-reproducible on one machine, not across machines (the table's ``cpu`` and
version columns say where each ran), so a variant is best compared with cells of the same machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from benchmarks import table as results_table
from benchmarks.dataset import load, seed_list


def finals(summaries: list[dict], env: str, budget: int) -> dict[str, dict[int, float]]:
    """``{algo: {seed: final evaluation}}`` over the cells of ``env`` run at ``budget``."""
    out: dict[str, dict[int, float]] = {}
    for s in summaries:
        if s["env"] == env and s["budget"] == budget:
            algo = s["algo"].split("@")[0]  # load() renames cells of a second budget
            out.setdefault(algo, {})[int(s["seed"])] = float(s["final_eval"])
    return out


def table(scores: dict[str, dict[int, float]], entry: str, threshold: float | None, min_seeds: int = 1) -> list[str]:
    """Markdown rows: the entry first, then the other algorithms by their paired difference to it (best first)."""
    if entry not in scores:
        raise SystemExit(f"no cells of the entry {entry!r} at this budget; algorithms with cells: {sorted(scores)}")
    base = scores[entry]
    reach = f" | >= {threshold:g}" if threshold is not None else ""
    rows = [
        f"| variant | seeds | final: mean +- std (median){reach} | entry on the same seeds{reach} | paired difference |",
        "|---|---|---|---|---|" + ("---|---|" if threshold is not None else ""),
    ]
    lines = []
    for algo, cells in scores.items():
        seeds = sorted(cells)
        if len(seeds) < min_seeds:
            continue
        x = np.array([cells[s] for s in seeds])
        common = [s for s in seeds if s in base]
        cols = [f"`{algo}`", f"{len(seeds)}: {seed_list(seeds)}", f"{x.mean():.1f} +- {x.std():.1f} ({np.median(x):.1f})"]
        if threshold is not None:
            cols.append(f"{int(np.sum(x >= threshold))} of {len(x)}")
        if common and algo != entry:
            y = np.array([base[s] for s in common])
            diff = np.array([cells[s] for s in common]) - y
            cols.append(f"{y.mean():.1f} ({len(common)} seed{'' if len(common) == 1 else 's'})")
            if threshold is not None:
                cols.append(f"{int(np.sum(y >= threshold))} of {len(y)}")
            cols.append(f"{diff.mean():+.1f}")
            key = diff.mean()
        else:
            cols += ["-"] * (3 if threshold is not None else 2)
            key = np.inf if algo == entry else -np.inf
        lines.append((key, "| " + " | ".join(cols) + " |"))
    return rows + [line for _, line in sorted(lines, key=lambda item: -item[0])]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True)
    parser.add_argument("--entry", required=True, help="the configuration every row is compared with (grpo:<tag>)")
    parser.add_argument("--budget", type=int, default=300_000)
    parser.add_argument("--threshold", type=float, help="count the seeds whose final evaluation reaches this")
    parser.add_argument("--reference", nargs="*", default=[], help="zoo algorithms to add as rows (ppo, trpo)")
    parser.add_argument("--min-seeds", type=int, default=1)
    parser.add_argument("--cells", default=str(results_table.CELLS))
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)
    summaries, _ = load(Path(args.cells), curves=None)
    scores = {
        algo: cells
        for algo, cells in finals(summaries, args.env, args.budget).items()
        if algo.startswith(("grpo:", "exact_trpo:", "adaptive_kl_ppo:")) or algo == args.entry or algo in args.reference
    }
    rows = table(scores, args.entry, args.threshold, args.min_seeds)
    command = " ".join(sys.argv[1:] if argv is None else argv)
    text = "\n".join(
        [
            f"# {args.env}: every variant at {args.budget} steps against `{args.entry}`",
            "",
            f"`python -m benchmarks.sweep_table {command}`. Paired difference: the variant minus the entry, averaged",
            "over the seeds both ran. A variant with a file in benchmarks/sweeps/ can be rerun; the others are retired",
            "configurations whose hyperparameters are in the results table (benchmarks/results/cells.csv.gz).",
            "",
            *rows,
            "",
        ]
    )
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
