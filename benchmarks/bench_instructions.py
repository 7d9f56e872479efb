"""
Instruction counts per training iteration: one algorithm against its baseline, without timing noise.

Wall-clock and CPU-clock ratios on this 2-core VM move by 10% between minutes (``bench_paired`` gives 95% intervals
about 0.05 wide), which is as large as the 5% the AdaptiveKLPPO issue asks about. Instructions retired do not depend
on the load: here each model (zoo hyperparameters, one torch thread) trains under valgrind's cachegrind
(``--cache-sim=no``: only the instruction count), once for ``k1`` and once for ``k2`` rollout + update iterations.
Setup (imports, building the model, the first iteration's lazy initialisation) is the same in both runs, so

    instructions per iteration = (I(k2) - I(k1)) / (k2 - k1)

and the instruction ratio ``baseline / algo`` is the fps ratio a machine whose instructions all cost the same would
show (>1: the algorithm does less work per env step). It is a proxy: it does not see memory stalls or SIMD width
(valgrind reports a CPU without AVX-512), and two algorithms' rollouts diverge after the first update (episodes end
at different steps), so resets are not identical. Each valgrind run takes about 50x the native time.

    python -m benchmarks.bench_instructions --algo adaptive_kl_ppo --envs CartPole-v1 Acrobot-v1 Pendulum-v1

Writes ``benchmarks/results/instructions_<algo>.csv`` (one row per run) and prints the table.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import BASELINE_OF, OURS

ROOT = Path(__file__).resolve().parents[1]
_IREFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _child(algo: str, env_id: str, iterations: int, seed: int, rollouts_only: bool) -> None:
    """Train ``iterations`` rollout + update iterations (run under valgrind by the parent)."""
    import torch as th

    from benchmarks.harness import build

    th.set_num_threads(1)
    model, _, _ = build(algo, env_id, seed)
    if rollouts_only:  # the policy never changes: both algorithms collect the same trajectories from the same seed
        model.train = lambda: None
    model.learn(iterations * model.n_steps * model.n_envs)
    print(f"num_timesteps={model.num_timesteps}")


def parse_instructions(valgrind_stderr: str) -> int | None:
    """The ``I refs`` total of a cachegrind summary (None when there is none)."""
    found = _IREFS.findall(valgrind_stderr)
    return int(found[-1].replace(",", "")) if found else None


def count_instructions(algo: str, env_id: str, iterations: int, seed: int, rollouts_only: bool = False) -> int:
    """Instructions executed by a whole child process (python start to exit) that trains ``iterations``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--branch-sim=no",
            f"--cachegrind-out-file={tmp}/cachegrind.out",
            sys.executable,
            "-m",
            "benchmarks.bench_instructions",
            "--child",
            algo,
            "--envs",
            env_id,
            "--iterations",
            str(iterations),
            "--seed",
            str(seed),
            *(["--rollouts-only"] if rollouts_only else []),
        ]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    instructions = parse_instructions(proc.stderr)
    if proc.returncode != 0 or instructions is None:
        raise RuntimeError(f"valgrind run failed ({' '.join(cmd)}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return instructions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="adaptive_kl_ppo", choices=sorted(OURS))
    parser.add_argument("--baseline", default=None, help="default: the algorithm's baseline (ppo or trpo)")
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1", "Pendulum-v1"])
    parser.add_argument("--k1", type=int, default=1, help="iterations of the shorter run (>= 1: lazy init)")
    parser.add_argument("--k2", type=int, default=3, help="iterations of the longer run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rollouts-only",
        action="store_true",
        help="skip train(): count the rollout alone (subtract from a full run for the update's share)",
    )
    parser.add_argument("--out", default=None, help="default: benchmarks/results/instructions_<algo>.csv")
    parser.add_argument("--child", metavar="ALGO", default=None, help=argparse.SUPPRESS)  # any harness algo name
    parser.add_argument("--iterations", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(args.child, args.envs[0], args.iterations, args.seed, args.rollouts_only)
        return
    if not 1 <= args.k1 < args.k2:
        parser.error("need 1 <= --k1 < --k2")

    baseline = args.baseline or BASELINE_OF[args.algo]
    rows = []
    for env_id in args.envs:
        for name in (args.algo, baseline):
            for k in (args.k1, args.k2):
                instructions = count_instructions(name, env_id, k, args.seed, args.rollouts_only)
                rows.append(
                    {
                        "env": env_id,
                        "algo": name,
                        "iterations": k,
                        "rollouts_only": args.rollouts_only,
                        "instructions": instructions,
                    }
                )
                print(f"{env_id} {name} k={k}: {instructions:,} instructions", flush=True)
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"instructions_{args.algo}.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    what = "rollout (no update)" if args.rollouts_only else "iteration"
    print(f"\n{args.algo} vs {baseline}: instructions per {what}, runs of {args.k1} and {args.k2} iterations")
    print(f"| env | {args.algo} (M instr / {what}) | {baseline} (M instr / {what}) | ratio {baseline} / {args.algo} |")
    print("|---|---|---|---|")
    for env_id in args.envs:
        per = {}
        for name in (args.algo, baseline):
            counts = {r["iterations"]: r["instructions"] for r in rows if r["env"] == env_id and r["algo"] == name}
            per[name] = (counts[args.k2] - counts[args.k1]) / (args.k2 - args.k1)
        ratio = per[baseline] / per[args.algo]
        print(f"| {env_id} | {per[args.algo] / 1e6:,.1f} | {per[baseline] / 1e6:,.1f} | {ratio:.3f} |")
    print(f"rows: {out}")


if __name__ == "__main__":
    main()
