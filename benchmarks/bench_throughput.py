"""
Throughput side by side: training fps, update (``train()``) time, env-stepping share and peak memory of each
algorithm against its baseline, at the zoo hyperparameters, one torch thread, cells run one after another (never in
parallel, so that timings are comparable), no evaluation.

    python -m benchmarks.bench_throughput [--steps 30000] [--envs CartPole-v1 Acrobot-v1 Pendulum-v1] [--mujoco]
        [--repeats 3] [--device cpu|cuda]

Writes ``benchmarks/results/throughput.csv`` (the results table of throughput, rebuilt by each run; BENCHMARKS.md's
"Throughput" table comes from it) and prints the ratios: GRPO and AdaptiveKLPPO against SB3 PPO, ExactTRPO against
sb3-contrib TRPO, and GRPO's env-stepping share. ``--mujoco`` adds HalfCheetah-v5 (slow: MuJoCo steps dominate).

Each measurement runs in a fresh process, one after another, alternating the algorithms' order between repeats
(peak RSS per algorithm, no warm-up carried from one algorithm to the next; with ``--device cuda`` also the peak GPU
memory torch allocated, ``peak_cuda_mb``). ``env_step_share`` is the share of training wall time spent inside the
training VecEnv's ``step_wait`` (the envs and their wrappers, VecNormalize included), timed by wrapping it.
``update_ms`` on CUDA is the wall time of ``train()``, which ends with host reads of the logged losses, so the GPU
work is included.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import BASELINE_OF

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, time
import torch as th
th.set_num_threads(1)
from benchmarks.harness import build
algo, env_id, steps, seed, device = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
model, _, _ = build(algo, env_id, seed, device)
times = []
original = model.train
def timed():
    t = time.perf_counter(); original(); times.append(time.perf_counter() - t)
model.train = timed
venv = model.get_env()
env_seconds = [0.0]
step_wait = venv.step_wait
def timed_step_wait():
    t = time.perf_counter(); out = step_wait(); env_seconds[0] += time.perf_counter() - t; return out
venv.step_wait = timed_step_wait
t0 = time.perf_counter()
model.learn(steps)
wall = time.perf_counter() - t0
print(json.dumps({"algo": algo, "env": env_id, "steps": model.num_timesteps, "fps": model.num_timesteps / wall,
                  "update_ms": 1000 * sum(times) / max(len(times), 1), "n_updates": len(times),
                  "update_share": sum(times) / wall, "env_step_share": env_seconds[0] / wall,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "peak_cuda_mb": th.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else 0.0}))
"""


def measure(algo: str, env_id: str, steps: int, seed: int = 0, device: str = "cpu") -> dict:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # keep a --target install
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, algo, env_id, str(steps), str(seed), device],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": path},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


#: The ratios printed after the runs: (label, algorithm, baseline).
RATIOS = (
    ("GRPO / PPO", "grpo", "ppo"),
    ("AdaptiveKLPPO / PPO", "adaptive_kl_ppo", "ppo"),
    ("ExactTRPO / TRPO", "exact_trpo", "trpo"),
)


def summary(rows: list[dict]) -> str:
    """The compact table: per env, the fps ratios of ``RATIOS`` and GRPO's env-stepping share (``-`` where a run is
    missing)."""
    header = f"{'env':16s}" + "".join(f"{label:>22s}" for label, _, _ in RATIOS) + f"{'GRPO env-step share':>22s}"
    lines = [header]
    for env_id in dict.fromkeys(r["env"] for r in rows):
        fps = {r["algo"]: r["fps"] for r in rows if r["env"] == env_id}
        cells = [f"{fps[a] / fps[b]:22.2f}" if a in fps and b in fps else f"{'-':>22s}" for _, a, b in RATIOS]
        share = next((r["env_step_share"] for r in rows if r["env"] == env_id and r["algo"] == "grpo"), None)
        lines.append(f"{env_id:16s}" + "".join(cells) + (f"{share:22.0%}" if share is not None else f"{'-':>22s}"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1", "Pendulum-v1"])
    parser.add_argument("--mujoco", action="store_true", help="also HalfCheetah-v5 (needs mujoco; slow)")
    parser.add_argument("--algos", nargs="+", default=["ppo", "grpo", "adaptive_kl_ppo", "trpo", "exact_trpo"])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "throughput.csv"))
    parser.add_argument("--device", default="cpu", help="torch device of every model (cpu, cuda)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="runs per (env, algo), in alternating algorithm order; the CSV holds the medians (single runs vary by "
        "10-20%% here even on a quiet machine)",
    )
    args = parser.parse_args(argv)
    envs = list(args.envs) + (["HalfCheetah-v5"] if args.mujoco and "HalfCheetah-v5" not in args.envs else [])
    rows = []
    for env_id in envs:
        runs: dict[str, list[dict]] = {algo: [] for algo in args.algos}
        for repeat in range(args.repeats):
            for algo in args.algos if repeat % 2 == 0 else args.algos[::-1]:
                try:
                    r = measure(algo, env_id, args.steps, device=args.device)
                except subprocess.CalledProcessError as exc:
                    print(f"{algo} on {env_id} failed:\n{exc.stderr[-2000:]}", file=sys.stderr)
                    continue
                runs[algo].append(r)
                print(
                    f"{env_id:15s} {algo:16s} fps {r['fps']:7.0f}  update {r['update_ms']:7.1f} ms  "
                    f"env step {r['env_step_share']:4.0%}  "
                    f"RSS {r['peak_rss_mb']:.0f} MB  GPU {r['peak_cuda_mb']:.0f} MB",
                    flush=True,
                )
        for algo in args.algos:
            if runs[algo]:
                median = {
                    k: statistics.median(r[k] for r in runs[algo])
                    for k in ("fps", "update_ms", "update_share", "env_step_share")
                }
                peaks = {k: max(r[k] for r in runs[algo]) for k in ("peak_rss_mb", "peak_cuda_mb")}
                rows.append({**runs[algo][0], **median, **peaks})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as f:
        f.write(
            "env,algo,steps,fps,update_ms,n_updates,update_share,peak_rss_mb,fps_ratio,update_ratio,rss_ratio,"
            "device,peak_cuda_mb,env_step_share\n"
        )
        for r in rows:
            base = next((b for b in rows if b["env"] == r["env"] and b["algo"] == BASELINE_OF.get(r["algo"], r["algo"])), None)
            ratios = (
                (r["fps"] / base["fps"], r["update_ms"] / base["update_ms"], r["peak_rss_mb"] / base["peak_rss_mb"])
                if base
                else (float("nan"),) * 3
            )
            f.write(
                f"{r['env']},{r['algo']},{r['steps']},{r['fps']:.0f},{r['update_ms']:.1f},{r['n_updates']},"
                f"{r['update_share']:.2f},{r['peak_rss_mb']:.0f},{ratios[0]:.2f},{ratios[1]:.2f},{ratios[2]:.2f},"
                f"{args.device},{r['peak_cuda_mb']:.0f},{r['env_step_share']:.2f}\n"
            )
    print(Path(args.out).read_text())
    print(summary(rows))


if __name__ == "__main__":
    main()
