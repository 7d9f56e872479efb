"""
Where the training time goes: samples ``learn`` with pyinstrument (0.5 ms interval, one torch thread, the zoo
hyperparameters, after a warm-up) and sorts every sample into a phase by the functions on its stack, e.g. env
stepping (``VecEnv.step_wait``), policy inference during the rollout, buffer writes, and, in the update, the
forward pass, ``backward``, the optimizer step and the minibatch sampling.

    python -m benchmarks.profile_phases --algos grpo adaptive_kl_ppo ppo exact_trpo trpo \
        --envs CartPole-v1 Pendulum-v1 --steps 20000 [--tree]

Prints, per (env, algorithm), the share of ``learn``'s wall time in each phase (``--tree``: also pyinstrument's
call tree). The shares of docs/guide/performance.md come from this command.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

#: (phase, test on the stack's (function, file) pairs, root first). The first phase whose test passes takes the sample.
Stack = Sequence[tuple[str, str]]


def _has(stack: Stack, *, func: str | None = None, file: str | None = None) -> bool:
    return any((func is None or f == func) and (file is None or path.endswith(file)) for f, path in stack)


def _in_rollout(stack: Stack) -> bool:
    return _has(stack, func="collect_rollouts")


def _in_update(stack: Stack) -> bool:
    return _has(stack, func="train") and not _in_rollout(stack)


PHASES: list[tuple[str, Callable[[Stack], bool]]] = [
    ("rollout: env step (VecEnv.step_wait)", lambda s: _in_rollout(s) and _has(s, func="step_wait")),
    (
        "rollout: policy inference (forward, sampling, log-prob)",
        lambda s: (
            _in_rollout(s) and (_has(s, file="policies.py") or _has(s, file="distributions.py") or _has(s, func="_call_impl"))
        ),
    ),
    ("rollout: buffer writes", lambda s: _in_rollout(s) and _has(s, file="buffers.py")),
    ("rollout: callbacks and step checks", lambda s: _in_rollout(s) and _has(s, file="callbacks.py")),
    ("rollout: other (advantages, obs to tensor, bookkeeping)", _in_rollout),
    ("update: backward", lambda s: _in_update(s) and _has(s, func="backward")),
    (
        "update: optimizer step and grad clipping",
        lambda s: _in_update(s) and (_has(s, file="optimizer.py") or _has(s, file="clip_grad.py")),
    ),
    (
        "update: old distributions / KL measurement (once per rollout)",
        lambda s: (
            _in_update(s)
            and (_has(s, func="_old_distribution_parameters") or _has(s, func="_measure_kl") or _has(s, func="_old_log_probs"))
        ),
    ),
    (
        "update: natural gradient / line search (TRPO)",
        lambda s: (
            _in_update(s)
            and (
                _has(s, file="solvers.py")
                or _has(s, file="fisher.py")
                or _has(s, func="conjugate_gradient_solver")
                or _has(s, func="hessian_vector_product")
                or _has(s, file="policy_step.py")
            )
        ),
    ),
    (
        "update: forward pass (evaluate_actions, distributions)",
        lambda s: (
            _in_update(s) and (_has(s, file="policies.py") or _has(s, file="distributions.py") or _has(s, func="_call_impl"))
        ),
    ),
    ("update: minibatch sampling", lambda s: _in_update(s) and _has(s, file="buffers.py")),
    ("update: loss and logging", _in_update),
    ("other", lambda s: True),
]


def _frames(identifier_stack: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for ident in identifier_stack:
        parts = ident.split("\x00")
        out.append((parts[0], parts[1] if len(parts) > 1 else ""))
    return out


def profile(algo: str, env_id: str, steps: int, seed: int = 0, tree: bool = False) -> dict[str, float]:
    """``{phase: share of learn's wall time}`` (plus ``fps``) for ``steps`` env steps after a warm-up iteration."""
    import torch as th
    from pyinstrument import Profiler

    from benchmarks.harness import build

    th.set_num_threads(1)
    model, _, _ = build(algo, env_id, seed)
    model.learn(1)  # one iteration: imports, buffers, first-call costs
    profiler = Profiler(interval=0.0005)
    start = time.perf_counter()
    profiler.start()
    model.learn(steps, reset_num_timesteps=False)
    samples = profiler.stop()
    wall = time.perf_counter() - start
    totals: dict[str, float] = defaultdict(float)
    for stack, seconds in ((r[0], r[1]) for r in samples.frame_records):
        frames = _frames(stack)
        phase = next(name for name, test in PHASES if test(frames))
        totals[phase] += seconds
    sampled = sum(totals.values())
    if tree:
        print(profiler.output_text(unicode=False, color=False))
    shares = {name: totals.get(name, 0.0) / sampled for name, _ in PHASES}
    shares["fps"] = steps / wall
    return shares


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["grpo", "adaptive_kl_ppo", "ppo", "exact_trpo", "trpo"])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Pendulum-v1"])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--tree", action="store_true", help="also print pyinstrument's call tree")
    args = parser.parse_args(argv)
    for env_id in args.envs:
        results = {algo: profile(algo, env_id, args.steps, tree=args.tree) for algo in args.algos}
        print(f"\n{env_id}, {args.steps} steps: share of learn's wall time (%)")
        print(f"{'phase':62s}" + "".join(f"{a:>16s}" for a in args.algos))
        for name, _ in PHASES:
            if any(results[a][name] >= 0.005 for a in args.algos):
                print(f"{name:62s}" + "".join(f"{100 * results[a][name]:16.1f}" for a in args.algos))
        print(f"{'fps (under the profiler)':62s}" + "".join(f"{results[a]['fps']:16.0f}" for a in args.algos))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
