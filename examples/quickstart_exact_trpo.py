"""
Quickstart: ExactTRPO on CartPole-v1.

ExactTRPO is TRPO whose natural-gradient step solves the Fisher system exactly (the Fisher of the policy on the
batch is formed analytically and factorised), instead of sb3-contrib's conjugate-gradient approximation. Its
constructor is sb3-contrib's ``TRPO`` constructor, so a TRPO configuration ports by changing the class name.

Runtime: about 1-2 minutes on one CPU core (50,000 env steps). Expected output: ``eval: ...`` close to 500.

    python examples/quickstart_exact_trpo.py
"""

import os

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import ExactTRPO

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 1_024 if FAST else 50_000

th.set_num_threads(1)

env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
model = ExactTRPO(
    "MlpPolicy",
    env,
    n_steps=512,
    batch_size=512,
    gamma=0.99,
    gae_lambda=0.98,
    learning_rate=1e-3,  # of the critic; the actor moves by the natural-gradient step
    n_critic_updates=20,
    cg_damping=1e-3,  # damping of the Fisher: (F + 1e-3 I) x = g, solved exactly
    target_kl=0.01,  # the trust region: mean KL(pi_old || pi_new) <= 0.01
    seed=0,
)
model.learn(TOTAL_STEPS)

mean, std = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=1000), n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
