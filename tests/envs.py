"""Small deterministic test envs (module level, so SubprocVecEnv workers can import them)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class TargetEnv(gym.Env):
    """Match a target drawn at reset (from the seeded ``np_random``): reward 1 per matching step, 5 steps.

    :param kind: ``"discrete"``, ``"multidiscrete"``, ``"multibinary"`` or ``"box"`` action space.
    """

    def __init__(self, kind: str = "discrete", length: int = 5):
        self.kind = kind
        self.length = length
        self.action_space = {
            "discrete": spaces.Discrete(3),
            "multidiscrete": spaces.MultiDiscrete([3, 2]),
            "multibinary": spaces.MultiBinary(3),
            "box": spaces.Box(-1.0, 1.0, (2,), dtype=np.float32),
        }[kind]
        self.observation_space = spaces.Box(-2.0, 2.0, (4,), dtype=np.float32)

    def _obs(self) -> np.ndarray:
        obs = np.zeros(4, dtype=np.float32)
        flat = np.atleast_1d(self.target).astype(np.float32)
        obs[: len(flat)] = flat
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.kind == "discrete":
            self.target = int(self.np_random.integers(3))
        elif self.kind == "multidiscrete":
            self.target = np.array([self.np_random.integers(3), self.np_random.integers(2)])
        elif self.kind == "multibinary":
            self.target = self.np_random.integers(2, size=3)
        else:
            self.target = self.np_random.uniform(-1, 1, size=2).astype(np.float32)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        if self.kind == "box":
            reward = -float(np.abs(np.asarray(action) - self.target).sum())
        else:
            reward = float(np.all(np.asarray(action) == self.target))
        return self._obs(), reward, self.t >= self.length, False, {}


class NoisyResetEnv(TargetEnv):
    """Ignores the reset seed (a classic bug): seeded resets are not reproducible."""

    _counter = 0

    def reset(self, *, seed=None, options=None):
        NoisyResetEnv._counter += 1
        return super().reset(seed=NoisyResetEnv._counter, options=options)


class EndlessEnv(TargetEnv):
    """Never ends an episode."""

    def step(self, action):
        obs, reward, _, _, info = super().step(action)
        return obs, reward, False, False, info


class NaNRewardEnv(TargetEnv):
    """Returns a NaN reward on the third step."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, (float("nan") if self.t == 3 else reward), terminated, truncated, info


class NaNObservationEnv(TargetEnv):
    """Returns a NaN observation on the second step."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.t == 2:
            obs = obs.copy()
            obs[0] = np.nan
        return obs, reward, terminated, truncated, info


class RaisesInStepEnv(TargetEnv):
    """Raises a ValueError at the 4th step of an episode (to test what a SubprocVecEnv worker reports)."""

    def step(self, action):
        if self.t == 3:
            raise ValueError("the env broke at step 4")
        return super().step(action)


class NoOptionsResetEnv(TargetEnv):
    """An older-style env whose ``reset(self, seed=None)`` takes no ``options`` keyword (SB3's DummyVecEnv copes)."""

    def reset(self, seed=None):  # type: ignore[override]
        return super().reset(seed=seed)


class AnySpacesEnv(gym.Env):
    """Any observation and action spaces (SB3's ``DummyEnv`` of ``tests/test_spaces.py``), with reproducible seeded
    resets: observations are sampled from the observation space, seeded by the reset seed; reward: minus the mean
    squared action (Box) or 0."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space):
        self.observation_space = observation_space
        self.action_space = action_space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        reward = -float(np.mean(np.square(action))) if isinstance(self.action_space, spaces.Box) else 0.0
        return self.observation_space.sample(), reward, False, False, {}
