"""bench_throughput measures what it prints: fps ratios against the baseline and the env-stepping share."""

import csv

from benchmarks.bench_throughput import main, summary


def test_summary_gives_each_ratio_and_grpos_env_step_share():
    rows = [
        {"env": "CartPole-v1", "algo": "ppo", "fps": 1000.0, "env_step_share": 0.1},
        {"env": "CartPole-v1", "algo": "grpo", "fps": 3000.0, "env_step_share": 0.4},
        {"env": "CartPole-v1", "algo": "adaptive_kl_ppo", "fps": 1100.0, "env_step_share": 0.1},
        {"env": "Pendulum-v1", "algo": "trpo", "fps": 500.0, "env_step_share": 0.2},
        {"env": "Pendulum-v1", "algo": "exact_trpo", "fps": 400.0, "env_step_share": 0.2},
    ]
    lines = summary(rows).splitlines()
    assert lines[1].split() == ["CartPole-v1", "3.00", "1.10", "-", "40%"]
    assert lines[2].split() == ["Pendulum-v1", "-", "-", "0.80", "-"]


def test_a_short_run_writes_fps_ratios_and_env_step_shares(tmp_path, capsys):
    out = tmp_path / "throughput.csv"
    main(["--steps", "300", "--envs", "CartPole-v1", "--algos", "ppo", "adaptive_kl_ppo", "--out", str(out)])
    rows = {r["algo"]: r for r in csv.DictReader(out.open())}
    assert set(rows) == {"ppo", "adaptive_kl_ppo"}
    assert float(rows["ppo"]["fps_ratio"]) == 1.0
    ratio = float(rows["adaptive_kl_ppo"]["fps"]) / float(rows["ppo"]["fps"])
    assert abs(float(rows["adaptive_kl_ppo"]["fps_ratio"]) - ratio) < 0.01
    for row in rows.values():
        assert 0.0 < float(row["env_step_share"]) < 1.0  # step_wait was timed, and it is not all of training
        assert int(row["steps"]) >= 300
    assert "AdaptiveKLPPO / PPO" in capsys.readouterr().out
