"""
Writing a reward function: score CartPole trajectories by how upright the pole stayed, not only how long.

A reward function takes one finished ``Trajectory`` (observations, actions, env rewards, infos, terminated,
truncated, length) and returns either a float (an outcome for the whole trajectory) or one number per step
(per-step rewards, whose sum is the outcome). GRPO combines several with ``reward_weights``.

Runtime: about 30-60 s on one CPU core. Expected output: the score of a hand-made trajectory, then
``eval: ...`` near 500 and the mean |pole angle| of the trained policy.

    python examples/custom_reward_function.py
"""

import os

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

import sb3_grpo
from sb3_grpo import GRPO, Trajectory

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_000 if FAST else 100_000
MAX_ANGLE = 0.2095  # CartPole ends the episode beyond 12 degrees


def upright(trajectory: Trajectory) -> np.ndarray:
    """Per step: 1 when the pole is vertical, 0 at the failure angle (observation index 2 is the pole angle)."""
    angles = np.asarray(trajectory.observations)[:, 2]
    return 1.0 - np.minimum(np.abs(angles) / MAX_ANGLE, 1.0)


# Check it by hand: three steps at angles 0, 0.1 and -0.2095.
toy = Trajectory(
    observations=np.array([[0, 0, 0.0, 0], [0, 0, 0.1, 0], [0, 0, -MAX_ANGLE, 0]]),
    actions=np.zeros(3, dtype=np.int64),
    rewards=np.ones(3),
    infos=[{}, {}, {}],
    terminated=True,
    truncated=False,
)
print("upright per step:", upright(toy).round(3), "outcome:", upright(toy).sum().round(3))  # [1. 0.523 0.] 1.523

# Register it under a name (what configs use); a callable can also be passed directly in reward_functions.
sb3_grpo.register_reward_function("upright", upright)

th.set_num_threads(1)
env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
model = GRPO(
    "MlpPolicy",
    env,
    reward_functions=["episodic_return", "upright"],  # survive long, and keep the pole vertical
    reward_weights=[1.0, 0.5],
    group_size=4,
    n_steps=64,
    batch_size=256,
    n_epochs=10,
    learning_rate=lambda p: 1e-3 * p,
    seed=0,
)
model.learn(TOTAL_STEPS)

eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=1000)
mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
obs, angles = eval_env.reset(), []
for _ in range(500):
    action, _ = model.predict(obs, deterministic=True)
    obs, _, _, _ = eval_env.step(action)
    angles.append(abs(float(obs[0, 2])))
print(f"mean |pole angle| over 500 steps: {np.mean(angles):.4f} rad")
