"""benchmarks/sweep_table.py: seed ranges, and the table's rows against hand-computed paired differences."""

import pytest

from benchmarks.dataset import seed_list
from benchmarks.sweep_table import finals, table


def test_seed_list_collapses_runs():
    assert seed_list([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert seed_list([3]) == "3"
    assert seed_list([0, 2, 4]) == "0, 2, 4"


def test_finals_keeps_one_env_and_budget():
    summaries = [
        {"env": "Hopper-v5", "budget": 300_000, "algo": "grpo:x", "seed": 0, "final_eval": 1.0},
        {"env": "Hopper-v5", "budget": 1_000_000, "algo": "grpo:x@1000k", "seed": 0, "final_eval": 2.0},
        {"env": "Pendulum-v1", "budget": 300_000, "algo": "grpo:x", "seed": 1, "final_eval": 3.0},
    ]
    assert finals(summaries, "Hopper-v5", 300_000) == {"grpo:x": {0: 1.0}}
    assert finals(summaries, "Hopper-v5", 1_000_000) == {"grpo:x": {0: 2.0}}


def test_table_pairs_each_variant_with_the_entry_on_common_seeds():
    scores = {
        "grpo:entry": {0: 1000.0, 1: 1010.0, 2: 990.0},
        "grpo:worse": {0: 900.0, 2: 995.0},  # common seeds 0, 2: entry mean 995, differences -100 and +5
        "grpo:better": {1: 1030.0},
        "grpo:alone": {7: 5.0},  # no seed in common with the entry
    }
    rows = table(scores, "grpo:entry", threshold=1000)
    assert len(rows) == 2 + 4
    body = rows[2:]
    assert body[0].startswith("| `grpo:entry` | 3: 0-2 | 1000.0 +- 8.2 (1000.0) | 2 of 3 | - | - | - |")
    assert body[1] == "| `grpo:better` | 1: 1 | 1030.0 +- 0.0 (1030.0) | 1 of 1 | 1010.0 (1 seed) | 1 of 1 | +20.0 |"
    assert body[2] == "| `grpo:worse` | 2: 0, 2 | 947.5 +- 47.5 (947.5) | 0 of 2 | 995.0 (2 seeds) | 1 of 2 | -47.5 |"
    assert body[3].startswith("| `grpo:alone` | 1: 7 |") and body[3].endswith("| - | - | - |")
    without = table(scores, "grpo:entry", threshold=None)
    assert without[3] == "| `grpo:better` | 1: 1 | 1030.0 +- 0.0 (1030.0) | 1010.0 (1 seed) | +20.0 |"
    # min_seeds drops the rows with fewer seeds (the entry's own row too, were it short).
    assert [row.split(" | ")[0] for row in table(scores, "grpo:entry", None, min_seeds=2)[2:]] == [
        "| `grpo:entry`",
        "| `grpo:worse`",
    ]


def test_table_refuses_a_missing_entry():
    with pytest.raises(SystemExit, match="no cells of the entry 'grpo:nope'"):
        table({"grpo:x": {0: 1.0}}, "grpo:nope", threshold=None)
