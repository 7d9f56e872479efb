"""
Save a trained model, load it back, and evaluate it: the same calls as with any SB3 algorithm.

``model.save(path)`` writes one zip (the policy, the optimizer, the hyperparameters, and for GRPO the reference
policy and the group-seed counter); ``GRPO.load(path, env=...)`` restores it, ready to ``predict``, ``evaluate`` or
continue ``learn``-ing.

Runtime: about 30-60 s on one CPU core. Expected output: the same evaluation score before saving and after loading
(near 500), and ``identical actions: True``.

    python examples/save_load_evaluate.py
"""

import os
import tempfile
from pathlib import Path

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import GRPO

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_000 if FAST else 100_000

th.set_num_threads(1)

env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
model = GRPO("MlpPolicy", env, group_size=4, n_steps=64, batch_size=256, learning_rate=lambda p: 1e-3 * p, seed=0)
model.learn(TOTAL_STEPS)

eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=1000)
mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10)
print(f"trained: {mean:.1f} +/- {std:.1f}")

with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "grpo_cartpole.zip"
    model.save(path)
    print(f"saved {path.name}: {path.stat().st_size / 1024:.0f} KiB")
    loaded = GRPO.load(path, env=make_vec_env("CartPole-v1", n_envs=8, seed=0), device="cpu")

eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=1000)
mean, std = evaluate_policy(loaded, eval_env, n_eval_episodes=10)
print(f"loaded:  {mean:.1f} +/- {std:.1f}")

observations = np.stack([eval_env.observation_space.sample() for _ in range(100)])
same = np.array_equal(model.predict(observations, deterministic=True)[0], loaded.predict(observations, deterministic=True)[0])
print(f"identical actions: {same}")

loaded.learn(1_000 if FAST else 10_000, reset_num_timesteps=False)  # training goes on where it stopped
print(f"timesteps after continuing: {loaded.num_timesteps}")
