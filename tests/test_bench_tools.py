"""The throughput tools: bench_wallclock's table (runs numbered and appended, --baseline-steps gives each of ours its
baseline's seconds, the aggregate block compares only rows of one run) and update_floor's bounds."""

import csv
import math
from types import SimpleNamespace

import pytest

from benchmarks import aggregate, bench_wallclock


def _fake_measure(calls):
    def measure(algo, env_id, seed, seconds, eval_seconds, n_eval_episodes, max_steps=None, device="cpu"):
        calls.append((algo, env_id, seed, seconds, max_steps))
        train_seconds = 40.0 + seed if math.isinf(seconds) else seconds
        return {
            "algo": algo,
            "env": env_id,
            "seed": seed,
            "seconds": seconds,
            "steps": max_steps or 1000,
            "train_seconds": train_seconds,
            "stopped_by": "steps" if math.isinf(seconds) else "seconds",
            "final_return": 100.0 if algo == "grpo" else 50.0,
            "best_return": 100.0,
            "seconds_to_threshold": 10.0 if algo == "grpo" else 20.0,
            "steps_to_threshold": 500,
            "n_evals": 3,
            "eval_seconds": 1.0,
            "wall_seconds": train_seconds + 1.0,
            "date": "2026-11-25",
            "commit": "abc",
        }

    return measure


def test_baseline_steps_gives_ours_the_baselines_seconds_and_rows_are_appended_by_run(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(bench_wallclock, "measure", _fake_measure(calls))
    out = tmp_path / "wallclock.csv"
    argv = ["--envs", "HalfCheetah-v5", "--algos", "grpo", "ppo", "--seeds", "0", "1", "--out", str(out)]
    bench_wallclock.main([*argv, "--baseline-steps", "300000", "--max-steps", "2000000"])
    # the baseline first, for its steps with no time limit; then ours for the seconds the baseline took
    assert calls == [
        ("ppo", "HalfCheetah-v5", 0, math.inf, 300000),
        ("grpo", "HalfCheetah-v5", 0, 40.0, 2000000),
        ("ppo", "HalfCheetah-v5", 1, math.inf, 300000),
        ("grpo", "HalfCheetah-v5", 1, 41.0, 2000000),
    ]
    bench_wallclock.main([*argv, "--seconds", "30"])
    rows = list(csv.DictReader(out.open()))
    assert [r["run"] for r in rows] == ["1"] * 4 + ["2"] * 4
    assert {r["seconds"] for r in rows if r["run"] == "2"} == {"30.0"}

    # the aggregate block: the latest run holding both, seeds pooled
    table = aggregate.block_wallclock(SimpleNamespace(results=tmp_path))
    (line,) = [row for row in table.splitlines() if row.startswith("| HalfCheetah-v5")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2:5] == ["2", "0, 1", "30"]
    assert cells[5] == "100.0 / 50.0" and cells[6] == "100.0 / 100.0"
    assert cells[8] == "10.0 / 20.0" and cells[9] == "0.50"


def test_baseline_steps_needs_the_baselines(tmp_path):
    with pytest.raises(SystemExit):
        bench_wallclock.main(["--algos", "grpo", "--baseline-steps", "1000", "--out", str(tmp_path / "w.csv")])


def test_update_floor_bounds_the_env_stepping_share():
    """benchmarks.update_floor: the network alone costs less than the whole gradient step, so its bound is higher,
    and both are shares."""
    from benchmarks import update_floor

    r = update_floor.measure("CartPole-v1", "grpo", steps=1000, repeats=3)
    assert 0 < r["network_fwd_bwd_us"] < r["gradient_step_us"]
    assert 0 < r["share_bound_today"] < r["share_bound_network_only"] < 1
    assert r["activation"] == "Tanh" and r["env_step_us"] > 0 and 0 < r["env_step_share"] < 1
