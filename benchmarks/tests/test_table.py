"""The results table (benchmarks/table.py)."""

import multiprocessing
import sys

import pytest

from benchmarks import table


def _summary(seed: int) -> dict:
    return {"algo": "grpo", "env": "CartPole-v1", "seed": seed, "budget": 1000, "final_eval": 1.0, "best_eval": 1.0}


def _add_many(first_seed: int, n: int, cells: str, curves: str, start) -> None:
    from pathlib import Path

    start.wait()
    for seed in range(first_seed, first_seed + n):
        table.add([(_summary(seed), None)], Path(cells), Path(curves))


@pytest.mark.skipif(sys.platform == "win32", reason="the table lock is fcntl's")
def test_harness_processes_side_by_side_each_add_their_cells(tmp_path):
    """Two processes adding cells at the same moments lose none (each reads and writes the table under a lock)."""
    cells, curves = tmp_path / "cells.csv.gz", tmp_path / "curves.csv.gz"
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)
    workers = [context.Process(target=_add_many, args=(first, 15, str(cells), str(curves), start)) for first in (0, 100)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    seeds = sorted(row["seed"] for row in table.read_cells(cells))
    assert seeds == [*range(15), *range(100, 115)]
