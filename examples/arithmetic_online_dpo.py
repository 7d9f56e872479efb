"""
Online DPO at home: learn arithmetic answers from preferences between answers to the same question.

OnlineDPO samples groups of 16 answers to one question (``sb3_grpo/Arithmetic-v0``, as GRPO does), ranks them with
the verifiable reward functions and turns each group into preference pairs (here every strictly ordered pair; ties
give none). The loss compares the policy's log-probability of the preferred and the rejected answer, each relative
to a reference policy; IPO's squared loss, ``(h - 1/(2 beta))^2``, keeps the margin from growing without bound.
No reward model, no critic, no advantage: only which answer was better.

Runtime: about 1.5 minutes on one CPU core (200,000 env steps). Expected output: the greedy exact-match accuracy on
all 100 questions (1.00 with seed 0; 0.97 to 1.00 over seeds 0-4, ``python -m benchmarks.family``), against about
0.01 for a random policy.

    python examples/arithmetic_online_dpo.py
"""

import os

import torch as th
from stable_baselines3.common.env_util import make_vec_env

import sb3_grpo  # noqa: F401  (registers sb3_grpo/Arithmetic-v0 and the arithmetic_* reward functions)
from sb3_grpo import OnlineDPO
from sb3_grpo.envs.arithmetic import split_accuracy

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_000 if FAST else 200_000

th.set_num_threads(1)

env = make_vec_env("sb3_grpo/Arithmetic-v0", n_envs=16, seed=0)
model = OnlineDPO(
    "MlpPolicy",
    env,
    reward_functions=["arithmetic_exact_match", "arithmetic_format", "arithmetic_length_penalty", "arithmetic_prefix_match"],
    group_size=16,  # 16 answers to each question
    pairs="all",  # every strictly ordered pair of a group (default: best vs worst)
    loss_type="ipo",
    beta=0.5,
    ref_update_interval=1,  # the reference follows the policy after every rollout
    n_steps=32,
    batch_size=64,  # preference pairs per minibatch
    n_epochs=4,
    learning_rate=lambda progress_remaining: 3e-3 * progress_remaining,  # linear decay from 3e-3 to 0
    ent_coef=0.2,  # keeps answers diverse, so that groups keep holding pairs
    policy_kwargs=dict(net_arch=[256, 256], activation_fn=th.nn.ReLU),
    seed=0,
)
model.learn(TOTAL_STEPS)

print(f"exact-match accuracy (greedy, all 100 questions): {split_accuracy(model, 'all'):.2f}")
