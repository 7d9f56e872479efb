"""
Soak test: a long run of each algorithm on CartPole-v1 with a ``SubprocVecEnv``, to check that memory stays flat and
throughput stays steady (issue 8). Zoo hyperparameters (``zoo_configs/*.yml``; PPO from rl-zoo as a reference), one
torch thread, each algorithm in a fresh process, one after another.

    python -m benchmarks.bench_soak [--steps 1000000] [--window 50000] [--algos grpo exact_trpo adaptive_kl_ppo ppo]

Every ``--window`` env steps it records the resident memory (RSS) of the training process and the summed RSS of the
env worker processes, and the fps over that window, to ``benchmarks/results/soak.csv``; at the end it prints, per
algorithm, RSS after the first window and at the end, and fps in the first and last windows.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "soak.csv"
FIELDS = ["algo", "env", "n_envs", "window", "timesteps", "elapsed_s", "fps_window", "rss_main_mb", "rss_workers_mb"]


def rss_mb(pid: int) -> float:
    """Resident set size of a process, in MiB (Linux ``/proc``; 0 when the process is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def build_subproc(algo: str, env_id: str, seed: int, n_envs: int | None) -> tuple[Any, int]:
    """The model with the zoo hyperparameters of ``harness.build``, on a ``SubprocVecEnv``."""
    import torch.nn as nn
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecNormalize

    from benchmarks.harness import _schedule, algorithm_class, load_hyperparams

    hp = load_hyperparams(algo, env_id)
    zoo_envs = int(hp.pop("n_envs", 8))
    n_envs = n_envs or zoo_envs
    for key in ("n_timesteps", "frame_stack", "env_wrapper", "callback", "normalize_kwargs"):
        hp.pop(key, None)
    policy = hp.pop("policy", "MlpPolicy")
    normalize = hp.pop("normalize", False)
    if isinstance(hp.get("policy_kwargs"), str):
        hp["policy_kwargs"] = eval(hp["policy_kwargs"], {"nn": nn, "dict": dict})
    for key in ("learning_rate", "clip_range", "clip_range_high"):
        if key in hp:
            hp[key] = _schedule(hp[key])
    venv = make_vec_env(env_id, n_envs=n_envs, seed=seed, vec_env_cls=SubprocVecEnv)
    if normalize:
        venv = VecNormalize(venv, gamma=hp.get("gamma", 0.99))
    return algorithm_class(algo)(policy, venv, seed=seed, device="cpu", verbose=0, **hp), n_envs


def child(algo: str, env_id: str, steps: int, window: int, seed: int, n_envs: int | None) -> None:
    """Train one algorithm and print one JSON line per window (run in a fresh process by :func:`main`)."""
    import torch as th
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecEnvWrapper

    th.set_num_threads(1)
    model, n_envs = build_subproc(algo, env_id, seed, n_envs)
    venv = model.get_env()
    while isinstance(venv, VecEnvWrapper):
        venv = venv.venv
    worker_pids = [p.pid for p in venv.processes]

    class Windows(BaseCallback):
        def _on_training_start(self) -> None:
            self.index, self.next = 0, window
            self.t_last, self.steps_last = time.perf_counter(), 0
            self.t0 = self.t_last

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next:
                now = time.perf_counter()
                row = {
                    "algo": algo,
                    "env": env_id,
                    "n_envs": n_envs,
                    "window": self.index,
                    "timesteps": self.num_timesteps,
                    "elapsed_s": round(now - self.t0, 3),
                    "fps_window": round((self.num_timesteps - self.steps_last) / (now - self.t_last), 1),
                    "rss_main_mb": round(rss_mb(os.getpid()), 1),
                    "rss_workers_mb": round(sum(rss_mb(pid) for pid in worker_pids), 1),
                }
                print(json.dumps(row), flush=True)
                self.index += 1
                self.next += window
                self.t_last, self.steps_last = now, self.num_timesteps
            return True

    try:
        model.learn(steps, callback=Windows())
    finally:
        model.get_env().close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["grpo", "exact_trpo", "adaptive_kl_ppo", "ppo"])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=50_000, help="env steps per measurement window")
    parser.add_argument("--n-envs", type=int, default=None, help="default: the zoo entry's n_envs (8 without one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.env, args.steps, args.window, args.seed, args.n_envs)
        return

    rows: list[dict[str, Any]] = []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    for algo in args.algos:
        command = [sys.executable, "-m", "benchmarks.bench_soak", "--child", algo, "--env", args.env]
        command += ["--steps", str(args.steps), "--window", str(args.window), "--seed", str(args.seed)]
        if args.n_envs:
            command += ["--n-envs", str(args.n_envs)]
        print(f"# {algo}: {args.steps} steps on {args.env}", flush=True)
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"{algo} failed (exit {done.returncode})")
        algo_rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        for row in algo_rows:
            print(
                f"  {row['timesteps']:>9,d} steps  {row['fps_window']:>8.0f} fps  main {row['rss_main_mb']:.0f} MiB  "
                f"workers {row['rss_workers_mb']:.0f} MiB",
                flush=True,
            )
        rows += algo_rows

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)

    header = (
        f"{'algo':<16} {'n_envs':>6} {'steps':>9} {'RSS start':>10} {'RSS end':>8} {'growth':>7} "
        f"{'workers start':>13} {'workers end':>11} {'fps first':>9} {'fps last':>8} {'last/first':>10}"
    )
    print(f"\n{header}\n{'-' * len(header)}")
    for algo in args.algos:
        mine = [r for r in rows if r["algo"] == algo]
        if not mine:
            continue
        first, last = mine[0], mine[-1]
        print(
            f"{algo:<16} {first['n_envs']:>6} {last['timesteps']:>9,d} {first['rss_main_mb']:>8.0f}Mi "
            f"{last['rss_main_mb']:>6.0f}Mi {last['rss_main_mb'] - first['rss_main_mb']:>+5.0f}Mi "
            f"{first['rss_workers_mb']:>11.0f}Mi {last['rss_workers_mb']:>9.0f}Mi {first['fps_window']:>9.0f} "
            f"{last['fps_window']:>8.0f} {last['fps_window'] / first['fps_window']:>10.2f}"
        )
    print(f"\nRSS start = after the first window of {args.window:,} steps. Windows: {args.out}")


if __name__ == "__main__":
    main()
