"""
Diagnosis: does a trained policy rely on its action noise?

Trains one harness cell (the sweep's hyperparameters, seed and budget, built as ``benchmarks.harness`` builds them, so
the training run is that cell's: checked bit for bit on ``hop_anneal`` seed 26) with SB3's CSV logger
(``train/approx_kl``, ``train/std``, ``rollout/ep_len_mean`` per update), saves the final model, then plays it from
``--starts`` seeded resets of a fresh env: deterministic (what evaluation runs) and with Gaussian noise of each
``--noise`` standard deviation added to the deterministic action.
Prints the return per noise level with its parts (the env's ``info["reward_*"]`` terms, summed over the episode,
and the distance moved along x where the env is MuJoCo's) and the episode lengths.

    python -m benchmarks.exp_noise_reliance --algo grpo:hop_anneal --env Hopper-v5 --seed 26

``hop_anneal`` seed 26 (225.6 at 300k): deterministic it falls after ~200 steps from every
start; with noise of std 0.005 / 0.01 / 0.02 / 0.03 it scores 229 / 371 / 966 / 981 (10 starts).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness

LOGGED = ("time/total_timesteps", "train/approx_kl", "train/clip_fraction", "train/std", "rollout/ep_len_mean")


def play(model: Any, env_id: str, starts: int, noise: float) -> tuple[float, list[int], dict[str, float]]:
    """
    Mean return and the episode lengths over ``starts`` seeded resets, deterministic action plus noise, and the
    return's parts: the mean sum of every ``info["reward_*"]`` entry (MuJoCo's forward, control and survival terms)
    and, where the env has MuJoCo's ``data.qpos``, the mean distance the root moved along x (``dx``, metres).
    """
    import gymnasium as gym
    from stable_baselines3.common.vec_env import VecNormalize

    train_env = model.get_env()
    normalize = train_env.normalize_obs if isinstance(train_env, VecNormalize) else (lambda obs: obs)
    env = gym.make(env_id)
    low, high = env.action_space.low, env.action_space.high
    data = getattr(env.unwrapped, "data", None)
    returns, lengths = [], []
    parts: dict[str, float] = {}
    for start in range(starts):
        obs, _ = env.reset(seed=start)
        x_start = float(data.qpos[0]) if data is not None else 0.0
        rng = np.random.default_rng(start)
        total, steps, done = 0.0, 0, False
        while not done:
            action, _ = model.predict(normalize(obs), deterministic=True)
            action = np.clip(action + noise * rng.standard_normal(action.shape), low, high)
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            for key, value in info.items():
                if key.startswith("reward_"):
                    parts[key] = parts.get(key, 0.0) + float(value) / starts
            steps += 1
            done = terminated or truncated
        if data is not None:
            parts["dx"] = parts.get("dx", 0.0) + (float(data.qpos[0]) - x_start) / starts
        returns.append(total)
        lengths.append(steps)
    env.close()
    return float(np.mean(returns)), lengths, parts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="grpo:hop_anneal")
    parser.add_argument("--env", default="Hopper-v5")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--budget", type=int, default=300_000)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.005, 0.01, 0.02, 0.03, 0.05])
    parser.add_argument("--out", default="/tmp/exp_noise_reliance", help="folder for progress.csv and model.zip")
    args = parser.parse_args(argv)

    import torch as th
    from stable_baselines3.common.logger import configure

    th.set_num_threads(1)
    out = Path(args.out) / harness.cell_name(args.algo, args.env, args.seed, args.budget)
    model, _, _ = harness.build(args.algo, args.env, args.seed)
    model.set_logger(configure(str(out), ["csv"]))
    model.learn(args.budget)
    model.save(out / "model")
    with open(out / "progress.csv") as f:
        for row in csv.DictReader(f):
            if row.get("train/approx_kl"):
                values = {key.split("/")[1]: float(row[key]) for key in LOGGED if row.get(key)}
                steps = int(values.pop("total_timesteps", 0))
                print(f"{steps:>7}  " + "  ".join(f"{key} {value:.4g}" for key, value in values.items()))
    for noise in [0.0, *args.noise]:
        mean, lengths, parts = play(model, args.env, args.starts, noise)
        label = "deterministic" if noise == 0.0 else f"noise std {noise}"
        split = ", ".join(f"{key} {value:.3g}" for key, value in parts.items())
        print(f"{label}: return {mean:.1f} ({split}), episode lengths {lengths}")


if __name__ == "__main__":
    main()
