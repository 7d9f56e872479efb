"""The "Can I use?" table of docs/guide/quickstart.md against the code: every cell but CUDA (``tests/test_devices.py``
trains each algorithm on CUDA where there is one) is checked by building, and for most cells training, a tiny model.

A supported cell must train for a few steps; an unsupported action space must be refused by the constructor.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from envs import TargetEnv
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from tiny_models import ALGORITHMS, CLASSES, COMMON, TINY

from sb3_grpo.common.torch_layers import TokenSequenceExtractor

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "quickstart.md"
ACTION_KINDS = {"Box": "box", "Discrete": "discrete", "MultiDiscrete": "multidiscrete", "MultiBinary": "multibinary"}


def table() -> dict[str, dict[str, bool]]:
    """The table: per algorithm class name, per column, whether it says supported."""
    text = PAGE.read_text().split("## Can I use?", 1)[1]
    rows = [line for line in text.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    out: dict[str, dict[str, bool]] = {}
    for line in rows[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert all(cell in ("✔️", "❌") for cell in cells[1:]), line
        out[cells[0]] = {column: cell == "✔️" for column, cell in zip(header[1:], cells[1:], strict=True)}
    return out


class DictObs(gym.ObservationWrapper):
    """TargetEnv's observation as part of a Dict observation."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = spaces.Dict({"vector": env.observation_space, "flag": spaces.Discrete(2)})

    def observation(self, observation: Any) -> dict[str, Any]:
        return {"vector": observation, "flag": 1}


class TokenObs(gym.ObservationWrapper):
    """TargetEnv's observation as a sequence of 4 token ids out of 5."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = spaces.MultiDiscrete([5] * 4)

    def observation(self, observation: Any) -> np.ndarray:
        return np.clip(np.round(observation + 2), 0, 4).astype(np.int64)


def train(name: str, env: Any, policy: str = "MlpPolicy", **kwargs: Any) -> None:
    """A tiny model of ``name`` on ``env``, trained for a rollout or two."""
    model = CLASSES[name](policy, env, **{**COMMON, **TINY[name], **kwargs})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.learn(60)


def test_table_has_every_algorithm():
    assert sorted(table()) == sorted(CLASSES[name].__name__ for name in ALGORITHMS)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_action_spaces(name):
    row = table()[CLASSES[name].__name__]
    for column, kind in ACTION_KINDS.items():
        env = DummyVecEnv([lambda kind=kind: TargetEnv(kind)] * 2)
        if row[column]:
            train(name, env)
        else:
            with pytest.raises(AssertionError, match="not supported"):
                train(name, env)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_dict_observations_gsde_multiprocessing_sequences(name):
    row = table()[CLASSES[name].__name__]
    assert row["Dict obs"] and row["gSDE"] and row["Multi processing"] and row["Sequence extractor"], "update this test"
    train(name, DummyVecEnv([lambda: DictObs(TargetEnv())] * 2), policy="MultiInputPolicy")
    train(name, DummyVecEnv([lambda: TargetEnv("box")] * 2), use_sde=True)
    env = SubprocVecEnv([TargetEnv, TargetEnv])
    try:
        train(name, env)
    finally:
        env.close()
    extractor = dict(features_extractor_class=TokenSequenceExtractor, features_extractor_kwargs=dict(sequence_model="gru"))
    train(name, DummyVecEnv([lambda: TokenObs(TargetEnv())] * 2), policy_kwargs=dict(net_arch=[16], **extractor))


@pytest.mark.parametrize("name", ALGORITHMS)
def test_no_recurrent_policy(name):
    """No policy carries a hidden state from step to step (sb3-contrib's RecurrentPPO has ``MlpLstmPolicy``)."""
    assert not table()[CLASSES[name].__name__]["Recurrent policy"]
    policies = CLASSES[name].policy_aliases
    assert not any("Lstm" in alias or "Recurrent" in policy.__name__ for alias, policy in policies.items())
