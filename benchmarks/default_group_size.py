"""
GRPO's default group_size (8) against 4 with every other argument at its default, on the tasks of the "Why this
default" table of the GRPO module docs; one row per run in ``benchmarks/results/default_group_size.csv``.

- ``identity_box``: SB3's ``tests/test_identity.py`` Box case with the settings SB3 gives PPO (``n_steps=256``,
  ``n_epochs=4``, ``learning_rate=1e-3``, ``learn(1000)``), mean reward over 20 episodes (SB3 asks >= 90 of 100);
- ``cartpole`` / ``pendulum``: ``GRPO("MlpPolicy", env_id, seed=s).learn(100_000)``, deterministic return over 10
  episodes of a separately seeded env;
- ``arithmetic``: ``GRPO("MlpPolicy", "sb3_grpo/Arithmetic-v0", seed=s).learn(100_000)`` (the env's own verifiable
  reward functions), greedy exact-match accuracy on all 100 questions.

    python -m benchmarks.default_group_size --tasks identity_box cartpole pendulum arithmetic --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import IdentityEnvBox
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import GRPO
from sb3_grpo.envs.arithmetic import split_accuracy

OUT = Path(__file__).resolve().parent / "results" / "default_group_size.csv"


def run(task: str, group_size: int, seed: int) -> float:
    if task == "identity_box":
        env = IdentityEnvBox(eps=0.5)
        model = GRPO("MlpPolicy", env, learning_rate=1e-3, n_steps=256, n_epochs=4, group_size=group_size, seed=seed,
                     verify_group_starts=False).learn(1000)  # fmt: skip
        return evaluate_policy(model, env, n_eval_episodes=20, warn=False)[0]
    if task == "arithmetic":
        model = GRPO("MlpPolicy", "sb3_grpo/Arithmetic-v0", group_size=group_size, seed=seed).learn(100_000)
        return split_accuracy(model, "all")
    env_id = {"cartpole": "CartPole-v1", "pendulum": "Pendulum-v1"}[task]
    model = GRPO("MlpPolicy", make_vec_env(env_id, n_envs=1, seed=seed), group_size=group_size, seed=seed).learn(100_000)
    return evaluate_policy(model, make_vec_env(env_id, n_envs=1, seed=seed + 1000), n_eval_episodes=10, warn=False)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["identity_box", "cartpole", "pendulum", "arithmetic"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    th.set_num_threads(1)
    new = not OUT.exists()
    with OUT.open("a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(["task", "group_size", "seed", "score", "seconds"])
        for task in args.tasks:
            for group_size in (8, 4):
                for seed in args.seeds:
                    start = time.perf_counter()
                    score = run(task, group_size, seed)
                    writer.writerow([task, group_size, seed, round(float(score), 3), round(time.perf_counter() - start)])
                    f.flush()


if __name__ == "__main__":
    main()
