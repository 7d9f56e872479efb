"""
Train GRPO on CartPole-v1 with a progress bar, then print its evaluation score.

GRPO has no critic: each rollout runs groups of 4 trajectories that start from the same state, and at every step
a member's discounted reward-to-go is compared with the other members' at the same step (per-step group
baseline). Hyperparameters are zoo_configs/grpo.yml's CartPole-v1
entry. Takes about 20-40 s on one CPU core; prints something like ``eval: 500.0 +/- 0.0 over 10 episodes``.

    python examples/grpo_cartpole.py [--steps 100000] [--seed 0]
"""

import argparse

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100_000)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

th.set_num_threads(1)  # small networks: one thread is the fastest on CPU
env = make_vec_env("CartPole-v1", n_envs=8, seed=args.seed)
model = GRPO(
    "MlpPolicy",
    env,
    group_size=4,  # G trajectories per group, all starting from the same state
    n_steps=64,  # groups keep opening until 64 * 8 steps are recorded, then the open groups finish
    batch_size=256,
    n_epochs=10,
    learning_rate=lambda progress: 1e-3 * progress,  # linear decay to 0
    gamma=0.98,
    advantage_estimator="group_step_baseline",  # per-step credit without a critic
    seed=args.seed,
)
model.learn(args.steps, progress_bar=True)

mean, std = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=args.seed + 1000), n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
