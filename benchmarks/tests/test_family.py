"""benchmarks.family: the same outcome signal for every algorithm, the table from stored rows."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from torch import nn

import sb3_grpo  # noqa: F401  (registers the envs)
from benchmarks import family
from sb3_grpo.common.reward_scoring import Trajectory
from sb3_grpo.envs.arithmetic_rewards import (
    arithmetic_exact_match,
    arithmetic_format,
    arithmetic_length_penalty,
    arithmetic_prefix_match,
)


def answer(env: gym.Env, digits: str) -> list[float]:
    """Write ``digits`` then end-of-answer; the rewards of every step."""
    rewards = []
    for token in [int(d) for d in digits] + [10]:
        _, reward, terminated, truncated, _info = env.step(token)
        rewards.append(reward)
        if terminated or truncated:
            break
    return rewards


@pytest.mark.parametrize("digits", ["12", "13", "2", "1"])
def test_env_reward_is_the_sum_of_the_reward_functions_on_the_last_step(digits):
    env = family.RewardFunctionsAsEnvReward(gym.make("sb3_grpo/Arithmetic-v0"), family.REWARD_FUNCTIONS)
    env.reset(seed=0, options={"question": "5+7"})
    rewards = answer(env, digits)
    info = {"answer": digits, "target": "12", "correct": digits == "12", "format_ok": True}
    trajectory = Trajectory(None, np.zeros(1), np.zeros(1), [info], True, False)
    expected = sum(
        f(trajectory) for f in (arithmetic_exact_match, arithmetic_format, arithmetic_length_penalty, arithmetic_prefix_match)
    )
    assert rewards[:-1] == [0.0] * (len(rewards) - 1)
    assert rewards[-1] == pytest.approx(expected)
    assert rewards[-1] == pytest.approx({"12": 3.0, "13": 1.5, "2": 0.5, "1": 1.0}[digits])
    # a second answer starts from an empty record
    env.reset(seed=1, options={"question": "5+7"})
    assert answer(env, "12")[-1] == pytest.approx(3.0)


@pytest.mark.parametrize("algo", family.ALGOS)
def test_every_algorithm_builds_with_the_shared_network(algo):
    model = family.build_qa(algo, "add", seed=0)
    assert model.n_envs == 16
    linear = [m for m in model.policy.modules() if isinstance(m, nn.Linear)]
    assert any(m.in_features == 256 and m.out_features == 256 for m in linear)
    assert any(isinstance(m, nn.ReLU) for m in model.policy.modules())
    assert not any(isinstance(m, nn.Tanh) for m in model.policy.modules())


def test_report_table_from_rows():
    rows = [
        dict(algo="grpo", task="add", seed=s, accuracy=a, steps_to_threshold=st, curve=json.dumps([[0, 0.0], [200_000, a]]))
        for s, a, st in [(0, 1.0, 150_000), (1, 0.98, "")]
    ]
    text = family.report_table(rows, {}, seeds=[0, 1])
    grpo = next(line for line in text.splitlines() if line.startswith("| GRPO"))
    assert "0.99 ± 0.01 (min 0.98)" in grpo
    assert "150k (1/2)" in grpo
    reinforce = next(line for line in text.splitlines() if line.startswith("| REINFORCE"))
    assert reinforce.count("| -") == 6
