"""Shared pieces of the SB3 conformance suite (``tests/test_sb3_*.py``).

The suite runs Stable-Baselines3's and sb3-contrib's own cross-algorithm test cases with our four algorithms,
next to SB3's PPO and sb3-contrib's TRPO as the reference (a case the reference fails is not a valid case).
Algorithm-specific settings live here, one small dict per algorithm, so that every case runs in a second or two.

GRPO and OnlineDPO (the group-sampling algorithms) check that the members of a group start from the same state;
SB3's test envs (``IdentityEnv``, ``FakeImageEnv``, ...) sample their start states from generators that
``reset(seed)`` does not seed, so with those envs they run with ``verify_group_starts=False`` (the documented
escape), through ``algo_kwargs(..., reproducible_reset=False)``. The envs defined here seed everything from the reset
seed and need no escape.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from sb3_contrib import TRPO
from stable_baselines3 import PPO

from sb3_grpo import GRPO, REINFORCE, AdaptiveKLPPO, ExactTRPO, OnlineDPO

#: our algorithms
ALGOS = [GRPO, ExactTRPO, AdaptiveKLPPO, REINFORCE, OnlineDPO]
#: the algorithms that sample groups of trajectories from one start state (actor only, no critic)
GROUP_ALGOS = (GRPO, OnlineDPO)
#: our algorithms without a critic (one network, the actor-only policies of sb3_grpo.common.policies)
ACTOR_ONLY = (GRPO, REINFORCE, OnlineDPO)
#: the references whose contract ours follow
REFERENCES = [PPO, TRPO]
#: references first, so that a failing reference case shows up next to ours
ALL_ALGOS = REFERENCES + ALGOS

#: small settings per algorithm: one rollout of 64 steps per env, one pass over it
SMALL_KWARGS: dict[type, dict[str, Any]] = {
    PPO: dict(n_steps=64, batch_size=64, n_epochs=1),
    TRPO: dict(n_steps=64, batch_size=64, cg_max_steps=5, n_critic_updates=1),
    ExactTRPO: dict(n_steps=64, batch_size=64, n_critic_updates=1),
    AdaptiveKLPPO: dict(n_steps=64, batch_size=64, n_epochs=1),
    # GRPO's rollout holds whole groups: with one env and G=2, two episodes (at least n_steps steps)
    GRPO: dict(n_steps=64, group_size=2, batch_size=64, n_epochs=1),
    # REINFORCE: one gradient step on the episodes that ended in the rollout (its defaults)
    REINFORCE: dict(n_steps=64),
    # the same groups; batch_size counts preference pairs
    OnlineDPO: dict(n_steps=64, group_size=2, batch_size=64, n_epochs=1),
}


def algo_id(model_class: type) -> str:
    return model_class.__name__


def algo_params(classes: list[type]) -> Any:
    """``pytest.mark.parametrize("model_class", ...)`` with the class names as ids."""
    return pytest.mark.parametrize("model_class", classes, ids=algo_id)


def algo_kwargs(model_class: type, *, reproducible_reset: bool = True, **overrides: Any) -> dict[str, Any]:
    """The small settings of ``model_class``, updated with ``overrides``.

    :param reproducible_reset: ``False`` for envs whose ``reset(seed)`` does not seed what they sample (SB3's test
        envs): GRPO and OnlineDPO then run with ``verify_group_starts=False``.
    """
    kwargs = dict(SMALL_KWARGS[model_class])
    if model_class in GROUP_ALGOS and not reproducible_reset:
        kwargs["verify_group_starts"] = False
    kwargs.update(overrides)
    return kwargs


def has_critic(model_class: type) -> bool:
    return model_class not in ACTOR_ONLY


def check_timesteps(model_class: type, num_timesteps: int, expected: int) -> None:
    """``num_timesteps == expected``; GRPO and OnlineDPO may run past it by whole groups, REINFORCE by the rest of an
    episode (its rollout runs on until an episode has ended): accepted deviations."""
    if model_class in ACTOR_ONLY:
        assert num_timesteps >= expected
    else:
        assert num_timesteps == expected


# ------------------------------------------------------------------ envs


class SeededDummyEnv(gym.Env):
    """SB3's ``DummyEnv`` (``tests/test_spaces.py``) with reproducible seeded resets: any observation and action
    spaces, observations sampled from the observation space, reward 0, episodes of ``ep_length`` steps."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, ep_length: int = 20):
        self.observation_space = observation_space
        self.action_space = action_space
        self.ep_length = ep_length
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
            self.action_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, dtype=self.action_space.dtype).reshape(self.action_space.shape))
        self.t += 1
        return self.observation_space.sample(), 0.0, False, self.t >= self.ep_length, {}


class DummyDictEnv(gym.Env):
    """SB3's ``DummyDictEnv`` (``tests/test_dict_env.py``): a ``Dict`` observation with an image, a vector and a
    ``Discrete`` part; ``reset(seed)`` seeds the observation space, so seeded resets are reproducible."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        use_discrete_actions: bool = False,
        channel_last: bool = False,
        nested_dict_obs: bool = False,
        vec_only: bool = False,
        ep_length: int = 20,
    ):
        super().__init__()
        if use_discrete_actions:
            self.action_space = spaces.Discrete(3)
        else:
            self.action_space = spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32)
        obs_shape = (36, 36, 1) if channel_last else (1, 36, 36)
        self.observation_space = spaces.Dict(
            {
                "img": spaces.Box(low=0, high=255, shape=obs_shape, dtype=np.uint8),
                "vec": spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32),
                "discrete": spaces.Discrete(4),
            }
        )
        if vec_only:
            self.observation_space = spaces.Dict({"vec": spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32)})
        if nested_dict_obs:
            self.observation_space.spaces["nested-dict"] = spaces.Dict({"nested-dict-discrete": spaces.Discrete(4)})
        self.ep_length = ep_length
        self.t = 0

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 0.0, False, self.t >= self.ep_length, {}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}


class NoOptionsResetEnv(gym.Env):
    """An env written against the old signature ``reset(self, seed=None)`` (no ``options``), as in SB3's
    ``tests/test_predict.py``; SB3's ``DummyVecEnv`` calls it without ``options``. Seeded resets are reproducible."""

    def __init__(self, ep_length: int = 10):
        self.observation_space = spaces.Box(-1, 1, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Box(-1, 1, shape=(2,), dtype=np.float32)
        self.ep_length = ep_length
        self.t = 0

    def reset(self, seed=None):  # the old signature, without options, is the point
        if seed is not None:
            self.observation_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(-np.abs(action).sum()), False, self.t >= self.ep_length, {}


class StoreActionEnvWrapper(gym.Wrapper):
    """Keeps the actions sent to the env (SB3's ``tests/test_sde.py``)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.actions: list[np.ndarray] = []

    def step(self, action):
        self.actions.append(action)
        return super().step(action)
