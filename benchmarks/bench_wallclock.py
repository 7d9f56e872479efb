"""
Equal wall-clock: the return each algorithm and its baseline reach after the same number of training seconds, and
the training seconds each needs to reach the env's threshold, at the zoo hyperparameters, one torch thread.

    python -m benchmarks.bench_wallclock [--seconds 60] [--eval-seconds 5] [--n-eval-episodes 10]
        [--envs CartPole-v1 Pendulum-v1 Acrobot-v1] [--algos grpo adaptive_kl_ppo exact_trpo ppo trpo] [--seeds 0]
        [--baseline-steps N] [--max-steps N]

Each (env, algorithm, seed) run trains in a fresh process, one after another (never in parallel, so that their
seconds are comparable; run it on an otherwise quiet machine), on the model and eval env of
``benchmarks.harness.build``. A callback keeps the *training clock*: the wall time since ``learn()`` started, less
the time spent evaluating (the clock is paused while evaluating). It evaluates the policy (``harness.evaluate_model``:
deterministic, ``--n-eval-episodes`` episodes on the eval env, VecNormalize statistics copied from the training env,
as the harness does) each time the training clock passes another ``--eval-seconds``, and stops ``learn()`` (with a
last evaluation) at the first env step after it passes ``--seconds``. An update cannot be interrupted, so a run can
end a fraction of an update past the budget; ``train_seconds`` is where it ended. ``learn()`` is called with the
env's step budget of the step benchmark (``harness.BUDGETS``, or ``--max-steps``), which is also the horizon of
the zoo entries' linear schedules (``lin_<x>``): a run that does these steps before its seconds are up ends there
(``stopped_by`` = ``steps``), with its final policy as its return at the budget.

``--baseline-steps N`` measures each of ours *at its baseline's time for N steps*: per env and seed the baselines
(SB3 PPO, sb3-contrib TRPO) train first for N steps with no time limit, then each of ours trains for the training
seconds its baseline took (its ``seconds``), with ``--max-steps`` as its step budget (set it above what it can do
in that time, or it stops at the steps).

An entry that changes its arguments partway through (a zoo entry's ``sb3_grpo.SwitchArguments`` callback, as GRPO's
two-phase Hopper-v5 and Walker2d-v5 entries have, or a sweep's ``switch`` with ``schedules: budget``) runs as one
``learn(--max-steps)`` with that callback, as rl-zoo trains it: the change comes at its number of steps if the run
gets there within its seconds, and the schedules run over ``--max-steps``, so give it about the steps it does in
those seconds for them to end where the run ends. A sweep's ``switch`` whose schedules restart at the change (a
second ``learn``) is refused.

Per run: ``final_return`` (the last evaluation: the return at equal seconds), ``best_return``,
``seconds_to_threshold`` and ``steps_to_threshold`` (training seconds and env steps at the first evaluation at or
above ``harness.THRESHOLDS``; empty if never; its resolution is ``--eval-seconds``), ``steps`` done, the evaluations'
count and seconds, the run's whole wall time, and the CPU and kernels it ran on (``harness.versions()``; numpy's BLAS
runs on one thread, as torch, as in the harness). Tables written before these two columns existed get them, empty,
when a run is next appended.

Rows are appended to the results table ``benchmarks/results/wallclock.csv`` (``--out`` to write elsewhere) with
``run``, one number per invocation: seconds are comparable only within one run on one machine, so one of ours is
compared only with its baseline of the same run and seed (``benchmarks.aggregate``'s wallclock block pools, per env
and pair, the seeds of the runs that gave the baseline one budget, each seed from its latest run holding both). The
printed table gives, per env, each of ours beside its baseline (``harness.BASELINE_OF``): the returns at equal
seconds and the seconds-to-threshold ratio (ours / baseline; below 1: ours gets there sooner). With several seeds,
returns are means and seconds to threshold medians (a seed that never reaches it counts as infinitely slow). Each
evaluation along a run (training seconds, steps, mean return) goes to ``wallclock_curves.csv`` beside the table,
under the run's number (:func:`curves_path`; plotted by ``benchmarks.aggregate``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import harness, table

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "wallclock.csv"
DEFAULT_ALGOS = ("grpo", "adaptive_kl_ppo", "exact_trpo", "ppo", "trpo")
ALGOS = tuple(dict.fromkeys(DEFAULT_ALGOS + harness.OURS + harness.BASELINES))
CURVE_FIELDS = ("run", "algo", "env", "seed", "train_seconds", "steps", "eval_mean")  # one row per evaluation
FIELDS = (
    "run",
    "algo",
    "env",
    "seed",
    "seconds",
    "steps",
    "train_seconds",
    "stopped_by",
    "final_return",
    "best_return",
    "seconds_to_threshold",
    "steps_to_threshold",
    "n_evals",
    "eval_seconds",
    "wall_seconds",
    "date",
    "commit",
    "cpu",
    "kernels",
)
ADDED_FIELDS = ("cpu", "kernels")  # since 2026-11-29: older tables get them, empty, when a run is appended


class TrainingClock:
    """Wall time since :meth:`start`, less the time spent inside :meth:`paused` blocks."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self.excluded = 0.0

    def start(self) -> None:
        self._start = time.perf_counter()
        self.excluded = 0.0

    def seconds(self) -> float:
        return time.perf_counter() - self._start - self.excluded

    def pause(self) -> float:
        """Stop counting; returns the moment to pass to :meth:`resume`."""
        return time.perf_counter()

    def resume(self, paused_at: float) -> None:
        self.excluded += time.perf_counter() - paused_at


def run(
    algo: str,
    env_id: str,
    seed: int,
    seconds: float,
    eval_seconds: float = 5.0,
    n_eval_episodes: int = 10,
    max_steps: int | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train ``algo`` on ``env_id`` for ``seconds`` of training time (evaluation excluded) in this process; its row."""
    from stable_baselines3.common.callbacks import BaseCallback

    from sb3_grpo import SwitchArguments

    if seconds <= 0 or eval_seconds <= 0:
        raise ValueError(f"seconds and eval_seconds must be positive (seconds may be inf), got {seconds} and {eval_seconds}")
    harness.one_thread()  # as the harness runs a cell
    started_on = harness.commit()  # the working tree may change while it trains
    model, eval_env, used = harness.build(algo, env_id, seed, device)
    callbacks: list[BaseCallback] = []
    switch = used.get("switch")
    budget = max_steps or harness.BUDGETS.get(env_id, 100_000)
    if switch:
        at, schedules = harness.check_switch(switch, budget)
        if schedules != "budget":
            raise ValueError(
                f"{algo} on {env_id}: its sweep changes the model partway through with schedules that restart at the "
                f"change (switch: {switch!r}), a second learn() whose horizon a run for a number of seconds does not "
                "have; add 'schedules: budget' to the switch (one learn() whose schedules run over --max-steps, as "
                "sb3_grpo.SwitchArguments trains), or run it with benchmarks.harness"
            )
        callbacks.append(SwitchArguments(at, dict(switch.get("set") or {})))
    clock = TrainingClock()
    curve: list[tuple[float, int, float]] = []  # (training seconds, steps, mean return)
    stopped_by = ["steps"]

    def evaluate() -> None:
        at = clock.seconds()
        paused_at = clock.pause()
        mean, _ = harness.evaluate_model(model, eval_env, n_eval_episodes)
        clock.resume(paused_at)
        curve.append((at, model.num_timesteps, mean))

    class WallClockBudget(BaseCallback):
        started = False

        def _on_training_start(self) -> None:  # once: learn() starts each stage of a SwitchArguments anew
            if not self.started:
                self.started, self.next_eval = True, eval_seconds
                clock.start()

        def _on_step(self) -> bool:
            now = clock.seconds()
            if now >= seconds:
                evaluate()
                stopped_by[0] = "seconds"
                return False
            if now >= self.next_eval:
                evaluate()
                self.next_eval = (math.floor(now / eval_seconds) + 1) * eval_seconds
            return True

    wall_start = time.perf_counter()
    model.learn(budget, callback=[*callbacks, WallClockBudget()])
    if stopped_by[0] == "steps":  # learn() did its steps before the seconds were up
        evaluate()
    wall = time.perf_counter() - wall_start
    threshold = harness.THRESHOLDS.get(env_id)
    reached = next((point for point in curve if threshold is not None and point[2] >= threshold), None)
    ran_on = harness.versions()
    return {
        "algo": algo,
        "env": env_id,
        "seed": seed,
        "seconds": seconds,
        "steps": model.num_timesteps,
        "train_seconds": round(curve[-1][0], 3),
        "stopped_by": stopped_by[0],
        "final_return": round(curve[-1][2], 2),
        "best_return": round(max(point[2] for point in curve), 2),
        "seconds_to_threshold": round(reached[0], 3) if reached else None,
        "steps_to_threshold": reached[1] if reached else None,
        "n_evals": len(curve),
        "eval_seconds": round(clock.excluded, 3),
        "wall_seconds": round(wall, 3),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commit": started_on,
        "cpu": ran_on["cpu"],
        "kernels": ran_on["kernels"],
        "curve": [[round(at, 3), steps, round(mean, 2)] for at, steps, mean in curve],  # to the curves table
    }


_CHILD = "import json; from benchmarks.bench_wallclock import run, _child_args; print(json.dumps(run(**_child_args())))"


def _child_args() -> dict[str, Any]:
    algo, env_id, seed, seconds, eval_seconds, n_eval_episodes, max_steps, device = sys.argv[1:9]
    return {
        "algo": algo,
        "env_id": env_id,
        "seed": int(seed),
        "seconds": float(seconds),
        "eval_seconds": float(eval_seconds),
        "n_eval_episodes": int(n_eval_episodes),
        "max_steps": int(max_steps) or None,
        "device": device,
    }


def measure(
    algo: str,
    env_id: str,
    seed: int,
    seconds: float,
    eval_seconds: float,
    n_eval_episodes: int,
    max_steps: int | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """:func:`run` in a fresh process (one torch thread, OMP on one thread)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    args = [algo, env_id, seed, seconds, eval_seconds, n_eval_episodes, max_steps or 0, device]
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path},
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def baseline_of(algo: str) -> str:
    """The baseline (SB3 PPO or sb3-contrib TRPO) of one of ours, sweep variants ``<algo>:<tag>`` included."""
    return harness.BASELINE_OF[algo.partition(":")[0]]


def _fmt(value: float | None, spec: str, width: int) -> str:
    return f"{value:{width}{spec}}" if value is not None and math.isfinite(value) else f"{'-':>{width}s}"


def median_seconds_to_threshold(rows: list[dict[str, Any]]) -> float:
    """The median of the rows' training seconds to the threshold; a run that never reached it counts as ``inf``."""
    values = [float(r["seconds_to_threshold"]) if r["seconds_to_threshold"] not in (None, "") else math.inf for r in rows]
    return statistics.median(values)


def summary(rows: list[dict[str, Any]]) -> str:
    """Per env, each of ours beside its baseline: returns at equal seconds and the seconds-to-threshold ratio."""

    def stats(env_id: str, algo: str) -> tuple[float | None, float | None]:
        runs = [r for r in rows if r["env"] == env_id and r["algo"] == algo]
        if not runs:
            return None, None
        return statistics.fmean(float(r["final_return"]) for r in runs), median_seconds_to_threshold(runs)

    header = (
        f"{'env':14s} {'algo':16s} {'baseline':9s}{'return':>10s}{'baseline':>10s}"
        f"{'s to thr':>10s}{'baseline':>10s}{'ratio':>8s}"
    )
    lines = [header]
    for env_id in dict.fromkeys(r["env"] for r in rows):
        algos = dict.fromkeys(r["algo"] for r in rows if r["env"] == env_id)
        for algo in (a for a in algos if a not in harness.BASELINES):
            base = baseline_of(algo)
            (ret, secs), (base_ret, base_secs) = stats(env_id, algo), stats(env_id, base)
            ratio = (
                secs / base_secs if secs is not None and base_secs is not None and math.isfinite(secs * base_secs) else None
            )
            lines.append(
                f"{env_id:14s} {algo:16s} {base:9s}{_fmt(ret, '.1f', 10)}{_fmt(base_ret, '.1f', 10)}"
                f"{_fmt(secs, '.1f', 10)}{_fmt(base_secs, '.1f', 10)}{_fmt(ratio, '.2f', 8)}"
            )
    return "\n".join(lines)


def read(path: Path) -> list[dict[str, Any]]:
    """The rows of the results table (none if it does not exist)."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def with_baselines(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each row of ours with its baseline's row of the same run, env and seed (rows without one are left out):
    seconds compare only within a run."""
    row_of = {(r["run"], r["env"], r["algo"], r["seed"]): r for r in rows}
    pairs = []
    for r in rows:
        if r["algo"].partition(":")[0] in harness.OURS:
            baseline = row_of.get((r["run"], r["env"], baseline_of(r["algo"]), r["seed"]))
            if baseline is not None:
                pairs.append((r, baseline))
    return pairs


def curves_path(path: Path) -> Path:
    """The table of the evaluations along each run, beside the results table: ``wallclock_curves.csv``."""
    return path.with_name(f"{path.stem}_curves{path.suffix}")


def _add_fields(f: Any, path: Path) -> None:
    """Give a table open for appending (and locked) the columns of ``ADDED_FIELDS`` it lacks, empty in its rows; refuse
    one whose columns are neither ``FIELDS`` nor ``FIELDS`` without some of the added ones."""
    f.seek(0)
    reader = csv.DictReader(f)
    found = tuple(reader.fieldnames or ())
    missing = table.added_columns_missing(found, FIELDS, ADDED_FIELDS)
    if missing is None:
        raise ValueError(
            f"{path}: columns {list(found)} are not bench_wallclock's {list(FIELDS)}: append to a table this command "
            "wrote, or give --out a new file"
        )
    if missing:
        rows = list(reader)
        f.seek(0)
        f.truncate()
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows({c: row.get(c, "") for c in FIELDS} for row in rows)
        f.flush()


def append(rows: list[dict[str, Any]], path: Path, run_id: int | None = None) -> int:
    """Append ``rows`` of run ``run_id`` to the results table (written with its header if new), and their
    evaluations (a row's ``curve``: training seconds, steps, mean return) to :func:`curves_path`; returns the run.

    ``None`` numbers a new run, one past the table's largest, while the table is locked: a run is numbered at its
    first row, so that two invocations side by side (each started before the other wrote) get their own numbers.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", newline="") as f:
        table.lock(f)  # released when the file closes
        new = os.fstat(f.fileno()).st_size == 0
        if not new:
            _add_fields(f, path)
        if run_id is None:  # read the table once, for a run's first row
            f.seek(0)
            run_id = 1 + max((int(r["run"]) for r in csv.DictReader(f) if r.get("run")), default=0)
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        rows = [{**r, "run": run_id} for r in rows]
        writer.writerows({k: ("" if r[k] is None else r[k]) for k in FIELDS} for r in rows)
        points = [[run_id, r["algo"], r["env"], r["seed"], *point] for r in rows for point in r.get("curve", ())]
        if points:  # under the results table's lock
            with open(curves_path(path), "a", newline="") as c:
                if c.tell() == 0:
                    c.write(",".join(CURVE_FIELDS) + "\n")
                csv.writer(c).writerows(points)
    return run_id


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="training seconds per run (evaluation excluded)")
    parser.add_argument("--eval-seconds", type=float, default=5.0, help="training seconds between evaluations")
    parser.add_argument("--n-eval-episodes", type=int, default=10)
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Pendulum-v1", "Acrobot-v1"])
    parser.add_argument(
        "--algos",
        nargs="+",
        default=list(DEFAULT_ALGOS),
        help=f"any of {', '.join(ALGOS)}, or one of ours as a sweep variant <algo>:<tag> (benchmarks/sweeps/<algo>_<tag>.yml)",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument(
        "--max-steps", type=int, default=None, help="env steps at most, and the schedules' horizon (default: harness.BUDGETS)"
    )
    parser.add_argument(
        "--baseline-steps",
        type=int,
        default=None,
        help="baselines train this many steps (no time limit) first; each of ours then trains for its baseline's seconds",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="the results table (rows appended)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.eval_seconds <= 0:
        parser.error("--seconds and --eval-seconds must be positive")
    algos = list(dict.fromkeys(args.algos))
    wrong = [a for a in algos if a.partition(":")[0] not in ALGOS or (":" in a and a.partition(":")[0] not in harness.OURS)]
    if wrong:
        parser.error(f"unknown --algos {wrong}: choose from {', '.join(ALGOS)}, or <algo>:<tag> for a sweep of ours")
    if args.baseline_steps is not None:
        missing = sorted({baseline_of(a) for a in algos if a not in harness.BASELINES} - set(algos))
        if args.baseline_steps <= 0 or missing:
            parser.error(f"--baseline-steps must be positive and needs each baseline in --algos (add {missing})")
        algos = [a for a in algos if a in harness.BASELINES] + [a for a in algos if a not in harness.BASELINES]
    unknown = [env for env in args.envs if env not in harness.THRESHOLDS]
    if unknown:
        print(f"no threshold for {unknown} in harness.THRESHOLDS: seconds to threshold stay empty", file=sys.stderr)
    out = Path(args.out)
    run_id: int | None = None  # numbered at its first row (append)
    rows = []
    for env_id in args.envs:
        for seed in args.seeds:
            baseline_seconds: dict[str, float] = {}
            for algo in algos:
                seconds, max_steps = args.seconds, args.max_steps
                if args.baseline_steps is not None:
                    if algo in harness.BASELINES:
                        seconds, max_steps = math.inf, args.baseline_steps
                    elif baseline_of(algo) in baseline_seconds:
                        seconds = baseline_seconds[baseline_of(algo)]
                    else:
                        print(f"{algo} on {env_id} seed {seed} skipped: its baseline did not run", file=sys.stderr)
                        continue
                try:
                    r = measure(algo, env_id, seed, seconds, args.eval_seconds, args.n_eval_episodes, max_steps, args.device)
                except subprocess.CalledProcessError as exc:
                    print(f"{algo} on {env_id} seed {seed} failed:\n{exc.stderr[-2000:]}", file=sys.stderr)
                    continue
                baseline_seconds[algo] = r["train_seconds"]
                run_id = append([r], out, run_id)  # row by row: a long run that fails later keeps what it measured
                rows.append(r | {"run": run_id})
                print(
                    f"{env_id:14s} {algo:16s} s{seed} {r['steps']:8d} steps in {r['train_seconds']:6.1f} s "
                    f"({r['stopped_by']})  return {r['final_return']:8.1f}  best {r['best_return']:8.1f}  "
                    f"to threshold {_fmt(r['seconds_to_threshold'], '.1f', 6)} s",
                    flush=True,
                )
    print(f"run {run_id}: {len(rows)} rows appended to {out}")
    print(summary(rows))


if __name__ == "__main__":
    main()
