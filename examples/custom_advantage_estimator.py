"""
Writing an advantage estimator in-process: rank-based group advantages for GRPO.

An advantage estimator is a class with a ``requires`` set (what it reads from ``AdvantageInputs``) and a
``compute(inputs) -> AdvantageOutputs`` method. GRPO hands it one column per trajectory: ``outcome_rewards`` and
``group_ids`` of shape ``(B,)``, and ``inputs.broadcast`` copies one value per trajectory to all its steps.

Here each trajectory's advantage is its centred rank within its group (ties share their average rank), so the
advantage ignores the scale of the rewards. The estimator is used twice: passed as an object, and registered
under a name (names are what YAML configs and the zoo CLI use).

Runtime: about 30-60 s on one CPU core. Expected output: the ranks of a toy group, then ``eval: ...`` near 500.

    python examples/custom_advantage_estimator.py
"""

import os

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

import sb3_grpo
from sb3_grpo import GRPO, AdvantageEstimator, AdvantageInputs, AdvantageOutputs

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_000 if FAST else 100_000


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``values``, ties sharing their average rank: ``(3, 10, 3, 0) -> (2.5, 4, 2.5, 1)``."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - counts + (counts + 1) / 2)[inverse]


class CentredRank(AdvantageEstimator):
    """Advantage = rank of the trajectory's outcome within its group, centred and scaled to [-1, 1]."""

    requires = frozenset({"outcome_rewards", "group_ids"})  # GRPO provides both; a critic algorithm would refuse it

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        rewards = np.asarray(inputs.outcome_rewards, dtype=np.float64)
        advantages = np.zeros_like(rewards)
        for group in np.unique(inputs.group_ids):
            members = np.flatnonzero(inputs.group_ids == group)
            if len(members) > 1:
                ranks = average_ranks(rewards[members])  # a flat group: all ranks equal -> advantage 0
                advantages[members] = (ranks - ranks.mean()) / ((len(members) - 1) / 2)
        return AdvantageOutputs(advantages=inputs.broadcast(advantages))


# Check it by hand on one group of four trajectories (trajectory layout: one column each, lengths 1).
toy = AdvantageInputs.from_trajectories([np.array([r]) for r in (3.0, 10.0, 3.0, 0.0)], gamma=0.99, group_ids=np.zeros(4))
print("ranks of (3, 10, 3, 0):", CentredRank().compute(toy).advantages[0])  # [ 0.     1.     0.    -1. ]

th.set_num_threads(1)
env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
hyperparams = dict(group_size=4, n_steps=64, batch_size=256, n_epochs=10, learning_rate=lambda p: 1e-3 * p, seed=0)

# 1. Pass the estimator object directly.
model = GRPO("MlpPolicy", env, advantage_estimator=CentredRank(), **hyperparams)

# 2. Or register it under a name and refer to it by name, as a config file would.
sb3_grpo.register_advantage_estimator("centred_rank", CentredRank)
model = GRPO("MlpPolicy", env, advantage_estimator="centred_rank", **hyperparams)
model.learn(TOTAL_STEPS)

mean, std = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=1000), n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
