"""
Paired throughput: one algorithm against its baseline, iteration by iteration, in one process.

``bench_throughput`` times whole runs, one after another; on this 2-core machine two runs of the same cell differ by
10-20% with nothing else running, which hides a 5% difference. Here both models (zoo hyperparameters, same seed, one
torch thread) live in one process and train alternately, one rollout + update (``learn()`` of exactly one
iteration) at a time, the order swapped each round. Each iteration is timed by the thread's CPU clock
(``time.thread_time``: time the scheduler gives to other processes is not counted) and by the wall clock. The fps ratio
of a round is ``t_baseline / t_algo`` (same env steps); the report gives the median of the per-round ratios with a
95% bootstrap interval, and the ratio of the two medians. Update (``train()``) and rollout times are split out.

    python -m benchmarks.bench_paired --algo adaptive_kl_ppo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --rounds 30

Writes ``benchmarks/results/paired_<algo>.csv`` (one row per round and algorithm) and prints the table.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import BASELINE_OF, OURS

ROOT = Path(__file__).resolve().parents[1]


def _timed_model(algo: str, env_id: str, seed: int):
    from benchmarks.harness import build

    model, _, _ = build(algo, env_id, seed)
    clock = {"train_cpu": 0.0, "train_wall": 0.0}
    original = model.train

    def timed() -> None:
        c, w = time.thread_time(), time.perf_counter()
        original()
        clock["train_cpu"] += time.thread_time() - c
        clock["train_wall"] += time.perf_counter() - w

    model.train = timed
    return model, clock


def _one_iteration(model, clock: dict) -> dict:
    """Train for exactly one rollout + update and return its timings (seconds) and env steps."""
    clock["train_cpu"] = clock["train_wall"] = 0.0
    steps_before = model.num_timesteps
    c, w = time.thread_time(), time.perf_counter()
    model.learn(model.n_steps * model.n_envs, reset_num_timesteps=False)
    cpu, wall = time.thread_time() - c, time.perf_counter() - w
    return {
        "steps": model.num_timesteps - steps_before,
        "cpu": cpu,
        "wall": wall,
        "train_cpu": clock["train_cpu"],
        "rollout_cpu": cpu - clock["train_cpu"],
    }


def _bootstrap_median(values: list[float], n: int = 5000, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    data = np.asarray(values)
    medians = np.median(rng.choice(data, size=(n, len(data)), replace=True), axis=1)
    return float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def run_env(algo: str, baseline: str, env_id: str, rounds: int, warmup: int, seed: int) -> list[dict]:
    models = {name: _timed_model(name, env_id, seed) for name in (algo, baseline)}
    rows = []
    for r in range(warmup + rounds):
        order = (algo, baseline) if r % 2 == 0 else (baseline, algo)
        for name in order:
            result = _one_iteration(*models[name])
            if r >= warmup:
                rows.append({"env": env_id, "round": r - warmup, "algo": name, **result})
    return rows


def summarise(rows: list[dict], algo: str, baseline: str) -> list[dict]:
    table = []
    for env_id in dict.fromkeys(row["env"] for row in rows):
        by = {
            name: {row["round"]: row for row in rows if row["env"] == env_id and row["algo"] == name}
            for name in (algo, baseline)
        }
        rounds = sorted(by[algo])
        entry = {"env": env_id, "rounds": len(rounds), "steps_per_iteration": by[algo][rounds[0]]["steps"]}
        for key in ("cpu", "wall", "train_cpu", "rollout_cpu"):
            ratios = [by[baseline][r][key] / by[algo][r][key] for r in rounds]
            low, high = _bootstrap_median(ratios)
            entry[f"{key}_ratio_median"] = statistics.median(ratios)
            entry[f"{key}_ratio_ci"] = (low, high)
            entry[f"{key}_ratio_of_medians"] = statistics.median(by[baseline][r][key] for r in rounds) / statistics.median(
                by[algo][r][key] for r in rounds
            )
            entry[f"{algo}_{key}_ms"] = 1000 * statistics.median(by[algo][r][key] for r in rounds)
            entry[f"{baseline}_{key}_ms"] = 1000 * statistics.median(by[baseline][r][key] for r in rounds)
        table.append(entry)
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="adaptive_kl_ppo", choices=sorted(OURS))
    parser.add_argument("--baseline", default=None, help="default: the algorithm's baseline (ppo or trpo)")
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1", "Pendulum-v1"])
    parser.add_argument("--rounds", type=int, default=30, help="timed iterations per algorithm and env")
    parser.add_argument("--warmup", type=int, default=2, help="untimed iterations first (allocations, caches)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="default: benchmarks/results/paired_<algo>.csv")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2")

    import torch as th

    th.set_num_threads(1)
    baseline = args.baseline or BASELINE_OF[args.algo]
    rows: list[dict] = []
    for env_id in args.envs:
        rows += run_env(args.algo, baseline, env_id, args.rounds, args.warmup, args.seed)
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"paired_{args.algo}.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    print(f"{args.algo} vs {baseline}: ratio = baseline time / {args.algo} time per iteration (>1: {args.algo} faster)")
    print(
        "| env | rounds | steps/iter | fps ratio (CPU), median [95% CI] | fps ratio (wall) | update ratio (CPU) "
        "| rollout ratio (CPU) | update ms (algo / base) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for e in summarise(rows, args.algo, baseline):
        lo, hi = e["cpu_ratio_ci"]
        print(
            f"| {e['env']} | {e['rounds']} | {e['steps_per_iteration']} | {e['cpu_ratio_median']:.3f} [{lo:.3f}, {hi:.3f}] "
            f"| {e['wall_ratio_median']:.3f} | {e['train_cpu_ratio_median']:.3f} | {e['rollout_cpu_ratio_median']:.3f} "
            f"| {e[f'{args.algo}_train_cpu_ms']:.1f} / {e[f'{baseline}_train_cpu_ms']:.1f} |"
        )
    print(f"rows: {out}")


if __name__ == "__main__":
    main()
