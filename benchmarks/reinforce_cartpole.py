"""
REINFORCE on CartPole-v1: does it solve it (mean deterministic return >= 475 over 10 episodes) within the budget?

Evaluates every ``--eval-every`` env steps on a separate env (10 episodes, deterministic actions) and reports the
final evaluation and the first step at which an evaluation reached 475. ``--set key=value`` changes a constructor
argument (YAML values, ``learning_rate=lin_1e-3`` for a linear decay). One thread, runs in sequence; every run
appends a row to the CSV given by ``--out``::

    python -m benchmarks.reinforce_cartpole --seeds 0 1 2 --budget 300000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from benchmarks.qa_tasks import append_row, learning_rate, parse_set
from sb3_grpo import REINFORCE

ENV_ID = "CartPole-v1"
THRESHOLD = 475.0
#: The configuration measured in the docs: 8 envs, 64 steps each per rollout (512 steps per update, as the default
#: n_steps=512 gives with one env).
CONFIG: dict[str, Any] = dict(n_envs=8, n_steps=64)


class ReturnCurve(BaseCallback):
    def __init__(self, every: int, seed: int):
        super().__init__()
        self.every, self.curve, self._next = every, [], every
        self.eval_env = make_vec_env(ENV_ID, n_envs=1, seed=10_000 + seed)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        if self.num_timesteps >= self._next:
            mean, _ = evaluate_policy(self.model, self.eval_env, n_eval_episodes=10, deterministic=True)
            self.curve.append((self.num_timesteps, float(mean)))
            self._next = (self.num_timesteps // self.every + 1) * self.every


def run(settings: dict[str, Any], seed: int, budget: int, eval_every: int) -> dict:
    settings = dict(settings)
    n_envs = int(settings.pop("n_envs", 8))
    if "learning_rate" in settings:
        settings["learning_rate"] = learning_rate(settings["learning_rate"])
    model = REINFORCE("MlpPolicy", make_vec_env(ENV_ID, n_envs=n_envs, seed=seed), seed=seed, device="cpu", **settings)
    curve = ReturnCurve(eval_every, seed)
    start = time.perf_counter()
    model.learn(budget, callback=curve)
    seconds = time.perf_counter() - start
    final, _ = evaluate_policy(model, curve.eval_env, n_eval_episodes=10, deterministic=True)
    curve.curve.append((model.num_timesteps, float(final)))
    reached = [steps for steps, value in curve.curve if value >= THRESHOLD]
    return dict(
        algo="reinforce",
        env=ENV_ID,
        seed=seed,
        budget=budget,
        steps=model.num_timesteps,
        final_return=float(final),
        best_return=max(v for _, v in curve.curve),
        steps_to_475=reached[0] if reached else "",
        seconds=round(seconds, 1),
        curve=json.dumps([[s, round(v, 1)] for s, v in curve.curve]),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=300_000)
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--out", default="/tmp/sb3_grpo_reinforce_cartpole.csv")
    args = parser.parse_args(argv)
    th.set_num_threads(1)
    overrides = parse_set(args.overrides)
    settings = {**CONFIG, **overrides}
    finals = []
    for seed in args.seeds:
        row = run(settings, seed, args.budget, args.eval_every)
        row["settings"] = json.dumps(overrides, sort_keys=True)
        append_row(Path(args.out), row)
        finals.append(row["final_return"])
        print(
            f"reinforce {ENV_ID} {row['settings']} seed {seed}: final {row['final_return']:.1f}  best "
            f"{row['best_return']:.1f}  steps to 475: {row['steps_to_475'] or '-'}  ({row['seconds']:.0f} s)",
            flush=True,
        )
    print(f"final return {np.mean(finals):.1f} +/- {np.std(finals):.1f} over seeds {args.seeds}, {args.budget:,} steps")


if __name__ == "__main__":
    main()
