"""Tiny models of every algorithm from one table: ``make_model(name, env=None, **overrides)``.

A test that holds for every algorithm is parametrised over :data:`ALGORITHMS` and builds its model here; it passes
as overrides only what the test itself is about (a rollout length it counts on, an option it exercises).

Test files import this module (``from tiny_models import ALGORITHMS, make_model``), not ``conftest``:
``benchmarks/tests/conftest.py`` is a module named ``conftest`` too, and when both test folders are collected
``from conftest import ...`` finds that one.
"""

from __future__ import annotations

from typing import Any

from envs import TargetEnv
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from sb3_grpo import GRPO, REINFORCE, AdaptiveKLPPO, ExactTRPO, OnlineDPO

#: every algorithm, by its rl-zoo key
ALGORITHMS = ("grpo", "exact_trpo", "adaptive_kl_ppo", "reinforce", "online_dpo")
#: the algorithms with a critic (they bootstrap unfinished episodes and never reseed the env)
CRITIC_ALGORITHMS = ("exact_trpo", "adaptive_kl_ppo")
#: the algorithms that sample groups of trajectories from one start state
GROUP_ALGORITHMS = ("grpo", "online_dpo")

CLASSES: dict[str, type[BaseAlgorithm]] = {
    "grpo": GRPO,
    "exact_trpo": ExactTRPO,
    "adaptive_kl_ppo": AdaptiveKLPPO,
    "reinforce": REINFORCE,
    "online_dpo": OnlineDPO,
}
#: each algorithm's tiny settings: a short rollout on two envs and one cheap update
TINY: dict[str, dict[str, Any]] = {
    "grpo": dict(n_steps=10, group_size=2),
    "exact_trpo": dict(n_steps=16, batch_size=16, n_critic_updates=2),
    "adaptive_kl_ppo": dict(n_steps=16, batch_size=16, n_epochs=1),
    "reinforce": dict(n_steps=16),
    "online_dpo": dict(n_steps=10, group_size=2),
}
#: what every tiny model shares
COMMON: dict[str, Any] = dict(policy_kwargs=dict(net_arch=[16]), seed=0, device="cpu")


def tiny_env() -> VecEnv:
    """Two :class:`~envs.TargetEnv` (discrete actions, episodes of 5 steps) in a ``DummyVecEnv``."""
    return DummyVecEnv([TargetEnv, TargetEnv])


def make_model(name: str, env: Any = None, **overrides: Any) -> BaseAlgorithm:
    """A tiny ``MlpPolicy`` model of the algorithm ``name`` (a key of :data:`ALGORITHMS`).

    :param env: the env (default: :func:`tiny_env`).
    :param overrides: constructor arguments that replace the tiny settings (or add to them).
    """
    env = tiny_env() if env is None else env
    return CLASSES[name]("MlpPolicy", env, **{**COMMON, **TINY[name], **overrides})
