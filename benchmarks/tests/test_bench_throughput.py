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


def test_throughput_table_has_the_env_stepping_column_once_measured(tmp_path):
    from benchmarks.blocks import BLOCKS

    block_throughput = BLOCKS["throughput"]

    header = "env,algo,steps,fps,update_ms,n_updates,update_share,peak_rss_mb,fps_ratio,update_ratio,rss_ratio"
    row = "CartPole-v1,ppo,1000,900,10.0,4,0.5,300,1.00,1.00,1.00"

    class Data:
        results = tmp_path

    (tmp_path / "throughput.csv").write_text(f"{header}\n{row}\n")  # a table from before the column
    assert "env stepping" not in block_throughput(Data)
    (tmp_path / "throughput.csv").write_text(f"{header},device,peak_cuda_mb,env_step_share\n{row},cpu,0,0.25\n")
    lines = block_throughput(Data).splitlines()
    assert "env stepping" in lines[0] and "| 25% |" in lines[2]
