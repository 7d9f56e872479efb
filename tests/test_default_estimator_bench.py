"""benchmarks/default_estimator.py: its table says what its runs measured, and its smallest task runs."""

import json
from pathlib import Path

from benchmarks.default_estimator import TASKS, run, table

ROOT = Path(__file__).resolve().parents[1]


def test_table_cells_by_hand():
    runs = [
        dict(task="identity_discrete", estimator="group_zscore", seed=1, score=80.0),
        dict(task="identity_discrete", estimator="group_zscore", seed=0, score=95.0),
        dict(task="arithmetic", estimator="group_step_baseline", seed=0, score=0.375),
    ]
    lines = table(runs, ["group_zscore", "group_step_baseline", "group_process"]).splitlines()
    assert lines[0] == "| task | score | group_zscore | group_step_baseline |"  # only estimators that ran
    # mean, then each seed in seed order, then how many reach the threshold of 90
    assert lines[2] == "| identity_discrete | mean reward (max 100), solved >= 90 | 88 (95 80) 1/2 |  |"
    assert lines[3] == "| arithmetic | exact-match accuracy |  | 0.38 (0.38) |"


def test_stored_results_cover_every_task_and_back_the_docs():
    runs = json.loads((ROOT / "benchmarks" / "results" / "default_estimator.json").read_text())["runs"]
    scores = {(r["task"], r["estimator"], r["seed"]): r["score"] for r in runs}
    for task in TASKS:
        for estimator in ("group_zscore", "group_step_baseline", "group_auto"):
            assert {seed for (t, e, seed) in scores if (t, e) == (task, estimator)} == {0, 1, 2}
        # group_auto is group_zscore run for run where only the whole answer is scored, group_step_baseline elsewhere
        same_as = "group_zscore" if task.startswith("arithmetic") else "group_step_baseline"
        for seed in (0, 1, 2):
            assert scores[task, "group_auto", seed] == scores[task, same_as, seed], (task, seed)


def test_the_sb3_identity_task_runs_and_reports_its_score():
    result = run("identity_discrete", "group_step_baseline", seed=3)
    assert result["steps"] == 1600  # SB3's budget of 1,200 steps, in whole groups of 8 episodes of 100 steps
    assert result["score"] >= 90
