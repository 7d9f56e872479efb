"""
Quickstart: GRPO on CartPole-v1.

GRPO has no critic. Each rollout runs groups of ``group_size`` trajectories that start from the same state; with
CartPole's per-step rewards the default estimator (``group_auto``) gives a step the reward that followed it relative
to what the other members of its group collected from the same step on (``group_step_baseline``).

Runtime: about 30-60 s on one CPU core (100,000 env steps). Expected output: ``eval: 500.0 +/- 0.0`` or close to it.

    python examples/quickstart_grpo.py
"""

import os

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import GRPO

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_000 if FAST else 100_000

th.set_num_threads(1)  # small networks: one thread is the fastest on CPU

env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
model = GRPO(
    "MlpPolicy",
    env,
    group_size=4,  # 4 trajectories per group, all starting from the same state
    n_steps=64,  # groups keep opening until 64 * 8 steps are recorded
    batch_size=256,
    n_epochs=10,
    learning_rate=lambda progress: 1e-3 * progress,  # linear decay to 0
    seed=0,
    verbose=0,
)
model.learn(TOTAL_STEPS)

mean, std = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=1000), n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
