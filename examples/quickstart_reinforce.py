"""
Quickstart: REINFORCE with a baseline on CartPole-v1.

The simplest policy gradient: each step's log-probability is pushed up in proportion to the reward-to-go
``G_t`` minus a baseline ``b`` (here a moving average of past returns), one gradient step per rollout, no critic,
no clipping, no reference policy. A rollout runs until at least one episode has ended; an episode still running
carries over to the next rollout.

Runtime: about 30 s on one CPU core (100,000 env steps). Expected output: ``eval: 492.7 +/- 21.9 over 10
episodes`` with seed 0 (the zoo entry over 5 seeds, ``python -m benchmarks.reinforce_cartpole --seeds 0 1 2 3 4
--budget 300000``: 475 first reached at 40k-61k steps, 500 on every seed at 300k).

    python examples/quickstart_reinforce.py
"""

import os

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import REINFORCE

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_048 if FAST else 100_000

th.set_num_threads(1)

env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
model = REINFORCE(
    "MlpPolicy",
    env,
    n_steps=64,  # 8 envs x 64 steps = 512 steps per gradient step
    baseline="moving_average",  # b: an exponential moving average of the batches' mean reward-to-go
    seed=0,
)
model.learn(TOTAL_STEPS)

mean, std = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=1000), n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
