"""
Rebuild every benchmark table and plot from the committed data files.

    python -m benchmarks.aggregate            # rewrite the generated tables in place, and the plots
    python -m benchmarks.aggregate --check    # exit 1 if a generated table differs from what the data gives
    python -m benchmarks.aggregate --summary - --envs Hopper-v5 --algos grpo:hop_fl ppo@300k   # any selection

Data: ``benchmarks/results/cells.csv.gz`` and ``curves.csv.gz`` (the harness cells, see ``benchmarks/table.py``),
``throughput.csv``, ``wallclock.csv`` with ``wallclock_curves.csv``, ``paired_adaptive_kl_ppo*.csv`` (the speed
benchmarks), and the data rows of finished studies (``instructions_adaptive_kl_ppo*.csv``, ``soak.csv``,
``arithmetic.json``). Tables are the blocks between ``<!-- aggregate: NAME -->`` and ``<!-- /aggregate -->`` in
README.md, BENCHMARKS.md and docs/guide/grpo_studies.md; plots go to ``benchmarks/results/*.png`` (they need
matplotlib, ``pip install -e ".[bench]"``; the tables need numpy and PyYAML).

What each block and plot shows (entry and sweep names, cells, files) is data: ``benchmarks/aggregate.yml``. The code:
``dataset.py`` (the cells by name, formatting), ``stats.py`` (statistics), ``blocks.py`` and ``study_blocks.py`` (one
function per kind of table), ``plots.py``; this module rewrites the pages.

Names: ``grpo`` is the zoo entry's cells, ``grpo:<tag>`` a sweep variant's, ``<name>@300k`` the cells of a second
budget (where one configuration ran at several budgets, the smallest keeps the name). Statistics: interquartile
means (IQM) with 95% stratified bootstrap intervals (2,000 resamples, seed 0), Fisher's exact test on counts and
the Mann-Whitney U test (normal approximation, tie and continuity corrected) on final returns, both two-sided.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from pathlib import Path

from benchmarks import table
from benchmarks.blocks import BLOCKS, per_env_table
from benchmarks.dataset import (  # noqa: F401  (the names the aggregate has always offered)
    CLASSIC,
    ENTRY_CHANGES,
    LARGE,
    NORMALISATION,
    ORDER,
    Data,
    change,
    flatten,
    load,
    no_cells,
    seed_list,
    select,
)
from benchmarks.plots import plots
from benchmarks.stats import bootstrap_ci, fisher_exact, iqm, mann_whitney  # noqa: F401

ROOT = table.ROOT
RESULTS = table.RESULTS
#: The files whose ``<!-- aggregate: NAME -->`` blocks are generated.
PAGES = (ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "docs" / "guide" / "grpo_studies.md")
_BLOCK = re.compile(r"(<!-- aggregate: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /aggregate -->)", re.S)


def render(text: str, data: Data, cache: dict[str, str] | None = None) -> str:
    """``text`` with every generated block rebuilt from ``data``."""
    cache = {} if cache is None else cache

    def build(match: re.Match) -> str:
        name = match["name"]
        if name not in BLOCKS:
            raise SystemExit(f"unknown generated block {name!r}; known: {sorted(BLOCKS)}")
        if name not in cache:
            try:
                cache[name] = BLOCKS[name](data)
            except KeyError as e:  # a name in benchmarks/aggregate.yml that no cell has
                raise SystemExit(f"generated block {name!r}: {e.args[0]}") from None
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


# ---- command line -----------------------------------------------------------------------------------------------


def summary_table(data: Data, envs, algos, seeds) -> str:
    """A per-env table of any selection of cells (``--summary``)."""
    chosen = select(data.cells, envs, algos, seeds)
    missing = [name for name in algos or [] if not any(s["algo"] == name for s in chosen)]
    if missing:
        where = ", ".join(envs or ["any env"]) + (f" with seeds {seed_list(seeds)}" if seeds else "")
        raise SystemExit(no_cells(", ".join(missing), where, (s["algo"] for s in select(data.cells, envs, None, seeds))))
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
