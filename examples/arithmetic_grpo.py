"""
GRPO at home: answer arithmetic questions token by token, scored by verifiable reward functions.

``sb3_grpo/Arithmetic-v0`` samples a question such as ``7+5`` at reset; the policy writes the answer one digit at
a time and ends it with an end-of-answer token. The env reward is 0; the last step's info says whether the answer
is right, and three registered reward functions turn that into GRPO's outcome reward:

- ``arithmetic_exact_match``: 1 if the answer is exactly right,
- ``arithmetic_format``: 1 if it is well formed (digits, no leading zero, then end-of-answer),
- ``arithmetic_length_penalty``: minus the difference in number of digits with the right answer.

Each group of 8 answers the same question (groups share the seeded reset), and every answer is scored against
its group: no critic, no value of a half-written answer needed.

Runtime: about 1-2 minutes on one CPU core (200,000 env steps). Expected output: the exact-match accuracy of the
greedy answers on 500 new questions (about 0.9 with seed 0; 0.5 to 0.9 across seeds, see
benchmarks/bench_arithmetic.py; a random policy gets about 0.01) and a few answered questions.

    python examples/arithmetic_grpo.py
"""

import os

import torch as th
from stable_baselines3.common.env_util import make_vec_env

import sb3_grpo  # noqa: F401  (registers sb3_grpo/Arithmetic-v0 and the arithmetic_* reward functions)
from sb3_grpo import GRPO
from sb3_grpo.envs.arithmetic import ArithmeticEnv, exact_match_accuracy

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_000 if FAST else 200_000

th.set_num_threads(1)

print(
    "before training, a random policy gets",
    exact_match_accuracy(GRPO("MlpPolicy", ArithmeticEnv(), seed=0), n_episodes=200, deterministic=False),
)

env = make_vec_env("sb3_grpo/Arithmetic-v0", n_envs=8, seed=0)  # env_kwargs=dict(task="sequence") for 2,4,6 -> 8
model = GRPO(
    "MlpPolicy",
    env,
    reward_functions=["arithmetic_exact_match", "arithmetic_format", "arithmetic_length_penalty"],
    group_size=8,  # 8 answers to each question
    n_steps=64,
    batch_size=256,
    n_epochs=10,
    learning_rate=1e-3,
    ent_coef=0.03,  # keeps answers diverse: a group of 8 identical wrong answers teaches nothing
    policy_kwargs=dict(activation_fn=th.nn.ReLU),
    seed=0,
)
model.learn(TOTAL_STEPS)

print(f"exact-match accuracy (greedy, 500 new questions): {exact_match_accuracy(model, n_episodes=500):.3f}")
env = ArithmeticEnv(render_mode="ansi")
for seed in range(5):
    obs, _ = env.reset(seed=10_000 + seed)
    done = False
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        obs, _, done, _, info = env.step(action)
    print(f"  {env.render():8s} {'right' if info['correct'] else 'wrong (' + info['target'] + ')'}")
