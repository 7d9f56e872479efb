"""bench_wallclock stops training at a budget of training seconds that leaves evaluation out, and compares at it; its
table numbers the runs and appends them, --baseline-steps gives each of ours its baseline's seconds, and the aggregate
block pairs ours with the baseline within one run and pools the seeds of runs with one budget."""

import csv
import math
import time
from types import SimpleNamespace

import pytest

import benchmarks.harness as harness
from benchmarks import bench_wallclock, blocks, dataset
from benchmarks.bench_wallclock import FIELDS, main, run, summary


@pytest.fixture(autouse=True)
def _no_entry_changes(monkeypatch):
    """The rows these tests write ran no changed zoo entry (their commit is made up)."""
    monkeypatch.setattr(dataset, "ENTRY_CHANGES", {})


def test_the_training_clock_stops_while_evaluating(monkeypatch):
    evaluate_model = harness.evaluate_model
    pause = 0.3

    def slow_evaluation(*args):  # an evaluation far longer than the time between evaluations
        time.sleep(pause)
        return evaluate_model(*args)

    monkeypatch.setattr(harness, "evaluate_model", slow_evaluation)
    start = time.perf_counter()
    row = run("grpo", "CartPole-v1", seed=0, seconds=2.0, eval_seconds=0.5, n_eval_episodes=1)
    wall = time.perf_counter() - start
    assert set(row) == set(FIELDS) - {"run"} | {"curve"}  # the command adds the run number, and keeps the curve apart
    assert len(row["curve"]) == row["n_evals"]
    assert row["curve"][-1] == [row["train_seconds"], row["steps"], row["final_return"]]
    assert [point[0] for point in row["curve"]] == sorted(point[0] for point in row["curve"])
    assert (row["algo"], row["env"], row["seed"], row["seconds"]) == ("grpo", "CartPole-v1", 0, 2.0)
    assert row["stopped_by"] == "seconds"
    # stopped at the first step past the budget: every evaluation before the last came before it (how far past it the
    # last one lands is an update's length, which the machine's load decides)
    assert row["curve"][-2][0] < 2.0 <= row["train_seconds"]
    assert row["n_evals"] >= 3  # every 0.5 s of training, the last at the stop
    # the evaluations' pauses come on top of the training seconds instead of eating into them
    assert row["eval_seconds"] >= pause * row["n_evals"]
    assert wall >= row["train_seconds"] + pause * row["n_evals"]
    assert row["wall_seconds"] >= row["train_seconds"] + row["eval_seconds"] - 0.01
    assert row["steps"] > 0 and row["best_return"] >= row["final_return"]
    assert row["cpu"] == harness.versions()["cpu"]
    # numpy's BLAS ran on one thread, as in a harness cell (the kernels are read at the end of the run)
    assert all(", 1 thread" in part for part in row["kernels"].split("; ") if not part.startswith("torch"))
    if row["seconds_to_threshold"] is not None:
        assert row["best_return"] >= 475.0  # CartPole-v1's threshold
        assert row["seconds_to_threshold"] <= row["train_seconds"] and row["steps_to_threshold"] <= row["steps"]


def test_a_run_that_does_its_steps_first_ends_there_and_is_evaluated(tmp_path):
    row = run("ppo", "CartPole-v1", seed=0, seconds=60.0, eval_seconds=30.0, n_eval_episodes=1, max_steps=256)
    assert row["stopped_by"] == "steps" and row["steps"] == 256  # one rollout: 8 envs x n_steps 32
    assert row["n_evals"] == 1 and row["train_seconds"] < 60.0


def test_summary_puts_each_of_ours_beside_its_baseline():
    def row(algo, env, ret, secs):
        return {"algo": algo, "env": env, "final_return": ret, "seconds_to_threshold": secs}

    rows = [
        row("ppo", "CartPole-v1", 400.0, 20.0),
        row("grpo", "CartPole-v1", 500.0, 5.0),
        row("adaptive_kl_ppo", "CartPole-v1", 450.0, None),
        row("trpo", "Pendulum-v1", -300.0, None),
        row("exact_trpo", "Pendulum-v1", -180.0, 30.0),
    ]
    lines = summary(rows).splitlines()
    assert lines[1].split() == ["CartPole-v1", "grpo", "ppo", "500.0", "400.0", "5.0", "20.0", "0.25"]
    assert lines[2].split() == ["CartPole-v1", "adaptive_kl_ppo", "ppo", "450.0", "400.0", "-", "20.0", "-"]
    assert lines[3].split() == ["Pendulum-v1", "exact_trpo", "trpo", "-180.0", "-300.0", "30.0", "-", "-"]
    assert len(lines) == 4  # baselines have no line of their own


def test_the_command_writes_one_row_per_run(tmp_path, capsys):
    out = tmp_path / "wallclock.csv"
    args = ["--seconds", "0.5", "--eval-seconds", "0.25", "--n-eval-episodes", "1", "--envs", "CartPole-v1"]
    main([*args, "--algos", "grpo", "--out", str(out)])
    rows = list(csv.DictReader(out.open()))
    assert [(r["run"], r["algo"], r["env"], r["seconds"]) for r in rows] == [("1", "grpo", "CartPole-v1", "0.5")]
    assert list(rows[0]) == list(FIELDS)
    assert float(rows[0]["train_seconds"]) >= 0.5
    # each evaluation along the run goes to the curves table beside it, under the run's number
    points = list(csv.DictReader(bench_wallclock.curves_path(out).open()))
    assert list(points[0]) == list(bench_wallclock.CURVE_FIELDS) and len(points) == int(rows[0]["n_evals"])
    assert {(p["run"], p["algo"], p["env"], p["seed"]) for p in points} == {("1", "grpo", "CartPole-v1", "0")}
    assert (points[-1]["train_seconds"], points[-1]["eval_mean"]) == (rows[0]["train_seconds"], rows[0]["final_return"])
    assert "grpo" in capsys.readouterr().out


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
            "cpu": "a cpu (avx2)",
            "kernels": "openblas Haswell, 1 thread; torch AVX2",
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

    # the aggregate block: one row per budget the baseline was given (300k steps in run 1, 30 s in run 2), seeds pooled
    lines = _block_rows(tmp_path, "HalfCheetah-v5")
    assert [cells[2:5] for cells in lines] == [["1", "0, 1", "40"], ["2", "0, 1", "30"]]  # mean of 40 s and 41 s
    cells = lines[1]
    assert cells[5] == "100.0 / 50.0" and cells[6] == "100.0 / 100.0"
    assert cells[8] == "10.0 / 20.0" and cells[9] == "0.50"


def _block_rows(results, env_id):
    table = blocks.BLOCKS["wallclock"](SimpleNamespace(results=results))
    return [[c.strip() for c in row.strip("|").split("|")] for row in table.splitlines() if row.startswith(f"| {env_id}")]


def test_the_block_pools_seeds_of_runs_with_one_budget_and_takes_a_seeds_latest_run(tmp_path, monkeypatch):
    """Seeds run in separate invocations (runs) at the same baseline budget make one row; a seed run again counts
    once, from its latest run; a seed's two rows always come from one run."""
    calls = []
    measure = _fake_measure(calls)
    finals = iter([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])  # in call order: baseline, ours, per run

    def scored(*args, **kwargs):
        return measure(*args, **kwargs) | {"final_return": next(finals)}

    monkeypatch.setattr(bench_wallclock, "measure", scored)
    out = tmp_path / "wallclock.csv"
    for seed in ("0", "1", "0"):  # runs 1, 2, 3: seed 0 again last
        argv = ["--envs", "Hopper-v5", "--algos", "trpo", "exact_trpo", "--seeds", seed, "--out", str(out)]
        bench_wallclock.main([*argv, "--baseline-steps", "1000000"])
    (cells,) = _block_rows(tmp_path, "Hopper-v5")
    assert cells[1:4] == ["ExactTRPO / sb3-contrib TRPO", "2, 3", "0, 1"]
    assert cells[5] == "50.0 / 40.0"  # ours: seed 0 of run 3 (60), seed 1 of run 2 (40); baseline: 50 and 30


def test_two_invocations_side_by_side_get_their_own_run_numbers(tmp_path, monkeypatch):
    """A run is numbered at its first row: one started while another had written nothing yet does not share its
    number (the number is one past the table's largest when the first row is written)."""
    out = tmp_path / "wallclock.csv"
    calls = []
    fake = _fake_measure(calls)
    started: list[bool] = []

    def measure(algo, env_id, *args, **kwargs):
        if not started and env_id == "Hopper-v5":  # a second invocation starts and finishes while this one trains
            started.append(True)
            monkeypatch.setattr(bench_wallclock, "measure", fake)
            bench_wallclock.main(["--envs", "Walker2d-v5", "--algos", "ppo", "--seconds", "5", "--out", str(out)])
            monkeypatch.setattr(bench_wallclock, "measure", measure)
        return fake(algo, env_id, *args, **kwargs)

    monkeypatch.setattr(bench_wallclock, "measure", measure)
    bench_wallclock.main(["--envs", "Hopper-v5", "--algos", "ppo", "trpo", "--seconds", "5", "--out", str(out)])
    rows = list(csv.DictReader(out.open()))
    assert [(r["run"], r["algo"], r["env"]) for r in rows] == [
        ("1", "ppo", "Walker2d-v5"),
        ("2", "ppo", "Hopper-v5"),
        ("2", "trpo", "Hopper-v5"),
    ]
    assert out.read_text().count("run,algo") == 1  # one header


def test_a_table_from_before_the_cpu_and_kernels_columns_gets_them_when_a_run_is_appended(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_wallclock, "measure", _fake_measure([]))
    out = tmp_path / "wallclock.csv"
    old_fields = [f for f in FIELDS if f not in bench_wallclock.ADDED_FIELDS]
    old_row = dict.fromkeys(old_fields, "1") | {"run": "1", "algo": "ppo", "env": "Hopper-v5", "seed": "0"}
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, old_fields)
        writer.writeheader()
        writer.writerow(old_row)
    bench_wallclock.main(["--envs", "Hopper-v5", "--algos", "ppo", "--seconds", "5", "--out", str(out)])
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == list(FIELDS) and out.read_text().count("run,algo") == 1
    assert rows[0] == old_row | {"cpu": "", "kernels": ""}  # the old run kept, its new columns empty
    assert (rows[1]["run"], rows[1]["kernels"]) == ("2", "openblas Haswell, 1 thread; torch AVX2")


def test_a_table_with_other_columns_is_refused_and_left_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_wallclock, "measure", _fake_measure([]))
    out = tmp_path / "wallclock.csv"
    out.write_text("run,algo,env,seed,return\n1,ppo,Hopper-v5,0,1000\n")
    with pytest.raises(ValueError, match="give --out a new file"):
        bench_wallclock.main(["--envs", "Hopper-v5", "--algos", "ppo", "--seconds", "5", "--out", str(out)])
    assert out.read_text() == "run,algo,env,seed,return\n1,ppo,Hopper-v5,0,1000\n"


def test_baseline_steps_needs_the_baselines(tmp_path):
    with pytest.raises(SystemExit):
        bench_wallclock.main(["--algos", "grpo", "--baseline-steps", "1000", "--out", str(tmp_path / "w.csv")])


def test_a_sweep_variant_of_ours_gets_its_baselines_seconds(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(bench_wallclock, "measure", _fake_measure(calls))
    out = tmp_path / "wallclock.csv"
    argv = ["--envs", "HalfCheetah-v5", "--algos", "ppo", "grpo:hc_kllr_carry", "--seeds", "0", "--out", str(out)]
    bench_wallclock.main([*argv, "--baseline-steps", "300000", "--max-steps", "2000000"])
    assert calls == [
        ("ppo", "HalfCheetah-v5", 0, math.inf, 300000),
        ("grpo:hc_kllr_carry", "HalfCheetah-v5", 0, 40.0, 2000000),
    ]
    table = blocks.BLOCKS["wallclock"](SimpleNamespace(results=tmp_path))
    (line,) = [row for row in table.splitlines() if row.startswith("| HalfCheetah-v5")]
    assert "| GRPO `hc_kllr_carry` / SB3 PPO | 1 | 0 |" in line
    for wrong in (["ppo:x"], ["sac"]):  # a baseline has no sweeps; an unknown algorithm is refused
        with pytest.raises(SystemExit):
            bench_wallclock.main(["--algos", *wrong, "--out", str(out)])


def test_a_switch_with_schedules_over_the_budget_changes_the_model_partway_on_one_clock(monkeypatch):
    """An entry that changes its arguments at a number of steps (a zoo entry's SwitchArguments, a sweep's switch with
    ``schedules: budget``) runs as one learn() with that callback: the change comes at its steps, and the training
    clock runs on through it (learn() starts each stage anew; the clock starts once)."""
    entry = {"n_envs": 2, "n_steps": 64, "group_size": 2}
    switch = {"at": 512, "set": {"ent_coef": 0.5}, "schedules": "budget"}
    monkeypatch.setattr(harness, "load_hyperparams", lambda algo, env_id: dict(entry, switch=switch))
    evaluate_model = harness.evaluate_model
    seen = []

    def recording(model, *args):
        seen.append((model.num_timesteps, model.ent_coef))
        return evaluate_model(model, *args)

    monkeypatch.setattr(harness, "evaluate_model", recording)
    starts = []
    start = bench_wallclock.TrainingClock.start
    monkeypatch.setattr(bench_wallclock.TrainingClock, "start", lambda clock: starts.append(1) or start(clock))
    row = run("grpo:x", "CartPole-v1", seed=0, seconds=1.5, eval_seconds=0.1, n_eval_episodes=1, max_steps=10**7)
    assert len(starts) == 1
    assert row["stopped_by"] == "seconds" and row["steps"] > 512
    assert {ent for steps, ent in seen if steps < 512} == {0.0} and {ent for steps, ent in seen if steps >= 512} == {0.5}
    seconds = [point[0] for point in row["curve"]]
    assert seconds == sorted(seconds) and seconds[-2] < 1.5 <= seconds[-1]  # one clock, not one per stage


def test_a_switch_that_restarts_the_schedules_is_refused(monkeypatch):
    """A sweep's ``switch`` without ``schedules: budget`` is a second learn() with its own horizon, which a run for a
    number of seconds does not have: refused, not dropped."""
    entry = {"n_envs": 2, "n_steps": 64, "group_size": 2, "switch": {"at": 256, "set": {"branch_every": 8}}}
    monkeypatch.setattr(harness, "load_hyperparams", lambda algo, env_id: dict(entry))
    with pytest.raises(ValueError, match="schedules: budget"):
        run("grpo:x", "CartPole-v1", seed=0, seconds=1.0, eval_seconds=1.0, n_eval_episodes=1)
    entry["switch"] = {"at": 256, "set": {"branch_every": 8}, "schedules": "budget", "when": 3}  # a key it does not know
    with pytest.raises(ValueError, match="unknown when"):
        run("grpo:x", "CartPole-v1", seed=0, seconds=1.0, eval_seconds=1.0, n_eval_episodes=1)
