"""The logger keys of docs/guide/logging.md against what each algorithm records.

Every algorithm trains briefly under settings that switch on each optional key (Box actions for ``train/std``,
``dynamic_sampling``, ``clip_range_high``, ``log_std_max``, ``beta > 0``, a ``KLAdaptiveLR`` learning rate, ...),
with a logger whose writer collects every key written. The keys an algorithm records over its settings must be the
keys the page lists for it: no undocumented key, no documented key that nothing records.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from envs import TargetEnv
from stable_baselines3.common.logger import KVWriter, Logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv
from tiny_models import ALGORITHMS, CLASSES, make_model

from sb3_grpo.common.schedules import KLAdaptiveLR

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "logging.md"

#: per algorithm, the settings that together record every key it can: (action space kind, constructor arguments)
SETTINGS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "grpo": [
        ("discrete", {}),
        ("box", dict(dynamic_sampling=True, clip_range_high=0.3, log_std_max=1.0, beta=0.1)),
        # the policy losses' own statistics
        ("discrete", dict(policy_loss_kwargs=dict(clip_ratio_c=3.0, delta=4.0))),
        ("discrete", dict(policy_loss="cispo")),
        ("discrete", dict(policy_loss="clip_cov")),
        ("discrete", dict(policy_loss="kl_cov")),
        ("discrete", dict(policy_loss="geo_mean")),
        ("box", dict(advantage_estimator="group_step_baseline", advantage_kwargs=dict(reward_history=True))),
        ("box", dict(advantage_estimator="group_step_baseline", advantage_kwargs=dict(state_baseline=True))),
    ],
    "exact_trpo": [("discrete", {}), ("box", dict(fisher_subsample=4))],  # a subsampled exact solve is refined
    "adaptive_kl_ppo": [("discrete", {}), ("box", dict(clip_range=0.2, clip_range_vf=0.2))],
    "reinforce": [("discrete", {}), ("box", dict(learning_rate=KLAdaptiveLR(1e-3), max_grad_norm=0.5))],
    "online_dpo": [("discrete", {}), ("box", dict(dynamic_sampling=True))],
}


class KeyCollector(KVWriter):
    """A logger output that keeps the names of the keys written to it."""

    def __init__(self) -> None:
        self.keys: set[str] = set()

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0) -> None:
        self.keys.update(key_values)

    def close(self) -> None:
        pass


class SuccessInfo(gym.Wrapper):
    """Reports ``is_success`` (a rewarded last step) at the end of each episode, for ``rollout/success_rate``."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info = {**info, "is_success": reward > 0}
        return obs, reward, terminated, truncated, info


def documented_keys() -> dict[str, set[str]]:
    """Per algorithm (rl-zoo key), the keys of the page's tables under the headings that name it ("Every algorithm":
    all of them)."""
    names = {CLASSES[name].__name__: name for name in ALGORITHMS}
    keys: dict[str, set[str]] = {name: set() for name in ALGORITHMS}
    applies: list[str] = []
    for line in PAGE.read_text().splitlines():
        if line.startswith("### "):
            words = set(re.findall(r"\w+", line))
            applies = list(ALGORITHMS) if "Every algorithm" in line else [names[w] for w in words if w in names]
            assert applies, f"logging.md: the heading {line!r} names no algorithm"
        match = re.match(r"\| `((?:rollout|train|time)/\w+)` \|", line)
        if match:
            assert applies, f"logging.md: {match.group(1)} is listed before any algorithm's heading"
            for name in applies:
                keys[name].add(match.group(1))
    return keys


def recorded_keys(name: str) -> set[str]:
    keys: set[str] = set()
    for kind, kwargs in SETTINGS[name]:
        env = DummyVecEnv([lambda kind=kind: Monitor(SuccessInfo(TargetEnv(kind)))] * 2)
        model = make_model(name, env=env, **kwargs)
        collector = KeyCollector()
        model.set_logger(Logger(folder=None, output_formats=[collector]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.learn(200, log_interval=1)
        keys |= collector.keys
    return keys


def test_page_lists_every_algorithm():
    keys = documented_keys()
    assert all(keys[name] for name in ALGORITHMS)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_documented_keys_are_the_recorded_keys(name):
    documented, recorded = documented_keys()[name], recorded_keys(name)
    algorithm = CLASSES[name].__name__
    assert not recorded - documented, f"{algorithm} records {sorted(recorded - documented)}: list them in logging.md"
    assert not documented - recorded, f"logging.md lists {sorted(documented - recorded)} for {algorithm}; none recorded"
