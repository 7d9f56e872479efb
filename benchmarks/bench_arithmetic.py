"""
GRPO against SB3 PPO on sb3_grpo/Arithmetic-v0 (single-digit ``a+b``, answers written token by token), same budget.

Configurations (every one: 8 envs, a ReLU 64x64 policy, lr 1e-3, 10 epochs, batch 256, entropy bonus 0.03):

- ``grpo_exact``: GRPO, groups of 8, outcome reward ``arithmetic_exact_match`` only.
- ``grpo_shaped``: GRPO with ``arithmetic_exact_match + arithmetic_format + arithmetic_length_penalty``.
- ``ppo_sparse``: PPO (critic, GAE, gamma 1) with the exact-match score as env reward (``reward_mode="sparse"``):
  the same signal as ``grpo_exact``.
- ``ppo_shaped``: PPO with the sum of the three scores as env reward (``reward_mode="shaped"``): the same signal as
  ``grpo_shaped``.

Each run trains for ``--steps`` env steps (default 200,000, about a minute per run at one thread) and reports the
exact-match accuracy of its greedy answers on 500 fresh questions, and the training fps. One thread, runs in
sequence::

    python benchmarks/bench_arithmetic.py [--steps 200000] [--seeds 0 1 2] [--configs grpo_exact ppo_sparse]

The table goes to stdout and, with the per-run numbers, to ``benchmarks/results/arithmetic.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import sb3_grpo.envs  # noqa: F401  (registers sb3_grpo/Arithmetic-v0)
from sb3_grpo import GRPO
from sb3_grpo.envs.arithmetic import exact_match_accuracy
from sb3_grpo.envs.arithmetic_rewards import arithmetic_exact_match, arithmetic_format, arithmetic_length_penalty

ENV_ID = "sb3_grpo/Arithmetic-v0"
CONFIGS = ("grpo_exact", "grpo_shaped", "ppo_sparse", "ppo_shaped")
COMMON = dict(
    learning_rate=1e-3,
    n_steps=64,
    batch_size=256,
    n_epochs=10,
    ent_coef=0.03,
    policy_kwargs=dict(activation_fn=th.nn.ReLU),
)


def build(config: str, seed: int):
    if config.startswith("grpo"):
        env = make_vec_env(ENV_ID, n_envs=8, seed=seed)
        rewards = [arithmetic_exact_match]
        if config == "grpo_shaped":
            rewards += [arithmetic_format, arithmetic_length_penalty]
        return GRPO("MlpPolicy", env, group_size=8, reward_functions=rewards, seed=seed, **COMMON)
    mode = "sparse" if config == "ppo_sparse" else "shaped"
    env = make_vec_env(ENV_ID, n_envs=8, seed=seed, env_kwargs=dict(reward_mode=mode))
    return PPO("MlpPolicy", env, gamma=1.0, gae_lambda=0.95, seed=seed, **COMMON)


def run(config: str, seed: int, steps: int, n_eval: int) -> dict:
    model = build(config, seed)
    start = time.perf_counter()
    model.learn(steps)
    seconds = time.perf_counter() - start
    accuracy = exact_match_accuracy(model, n_episodes=n_eval, seed=1_000_000 + seed)
    return dict(
        config=config,
        seed=seed,
        steps=model.num_timesteps,
        accuracy=accuracy,
        seconds=seconds,
        fps=model.num_timesteps / seconds,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS)
    parser.add_argument("--n-eval", type=int, default=500, help="questions for the final exact-match accuracy")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "arithmetic.json"))
    args = parser.parse_args()
    th.set_num_threads(1)

    runs = []
    for config in args.configs:
        for seed in args.seeds:
            result = run(config, seed, args.steps, args.n_eval)
            runs.append(result)
            print(
                f"{config:12s} seed {seed}: accuracy {result['accuracy']:.3f}  fps {result['fps']:.0f}  "
                f"({result['seconds']:.0f} s)",
                flush=True,
            )

    print(
        f"\nsb3_grpo/Arithmetic-v0 (a+b, a,b in 0..9), {args.steps:,} env steps, seeds {args.seeds}, "
        f"greedy exact-match accuracy on {args.n_eval} questions (random policy: about 0.01)\n"
    )
    print(f"| {'config':12s} | accuracy (mean +/- std) | per seed            | fps  |")
    print(f"|{'-' * 14}|{'-' * 25}|{'-' * 21}|{'-' * 6}|")
    for config in args.configs:
        cell = [r for r in runs if r["config"] == config]
        acc = np.array([r["accuracy"] for r in cell])
        fps = np.mean([r["fps"] for r in cell])
        per_seed = " ".join(f"{a:.2f}" for a in acc)
        print(f"| {config:12s} | {acc.mean():.3f} +/- {acc.std():.3f}         | {per_seed:19s} | {fps:4.0f} |")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(steps=args.steps, seeds=args.seeds, n_eval=args.n_eval, runs=runs), indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
