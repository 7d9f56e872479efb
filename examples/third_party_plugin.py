"""
Use estimators and reward functions from an installed third-party plugin distribution.

``plugins/sb3-grpo-rank-plugin`` is a complete plugin package (its README is a template to copy). Once installed
(``pip install -e ./plugins/sb3-grpo-rank-plugin``) its names are available everywhere a name is accepted: here,
in zoo YAML files and on the zoo command line. ``SB3_GRPO_LOAD_PLUGINS`` restricts which plugins load.

Runtime: about 30-60 s on one CPU core. Expected output: the active plugins, then ``eval: ...`` near 500 (or
instructions to install the plugin when it is missing).

    python examples/third_party_plugin.py
"""

import os
import sys

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

import sb3_grpo
from sb3_grpo import GRPO

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_000 if FAST else 100_000

for plugin in sb3_grpo.list_plugins():
    print(f"plugin {plugin['name']:45s} {plugin['source']}")

if "group_rank" not in sb3_grpo.available_advantage_estimators():
    print("The rank plugin is not installed: pip install -e ./plugins/sb3-grpo-rank-plugin")
    sys.exit(0)

th.set_num_threads(1)
model = GRPO(
    "MlpPolicy",
    make_vec_env("CartPole-v1", n_envs=8, seed=0),
    advantage_estimator="group_rank",  # from the plugin: centred ranks within each group
    reward_functions=["survival_bonus"],  # from the plugin: +1 per step, -1 on failure
    group_size=4,
    n_steps=64,
    batch_size=256,
    n_epochs=10,
    learning_rate=lambda p: 1e-3 * p,
    seed=0,
)
model.learn(TOTAL_STEPS)

mean, std = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=1000), n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
