"""
Quickstart: AdaptiveKLPPO on CartPole-v1.

AdaptiveKLPPO is PPO whose surrogate carries a penalty ``beta * KL(pi_old || pi)``; after each update beta is
halved when the measured KL fell below ``target_kl / 1.5`` and doubled when it rose above ``1.5 * target_kl``.
Its constructor is SB3's ``PPO`` constructor plus the KL options (clipping is off unless ``clip_range`` is given).

Runtime: about 1 minute on one CPU core (100,000 env steps). Expected output: ``eval: ...`` close to 500, then
the final KL coefficient.

    python examples/quickstart_adaptive_kl_ppo.py
"""

import os

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import AdaptiveKLPPO

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 1_024 if FAST else 100_000

th.set_num_threads(1)

env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
model = AdaptiveKLPPO(
    "MlpPolicy",
    env,
    n_steps=32,
    batch_size=256,
    n_epochs=20,
    gamma=0.98,
    gae_lambda=0.8,
    learning_rate=lambda progress: 1e-3 * progress,
    target_kl=0.01,  # beta adapts so that the KL per update stays near 0.01
    kl_coef=1.0,  # initial beta
    seed=0,
)
model.learn(TOTAL_STEPS)

mean, std = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=1000), n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
print(f"final KL coefficient beta: {model.kl_coef:.4g}")
