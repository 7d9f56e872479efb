"""VecEnv helpers shared by the algorithms."""

from __future__ import annotations

from typing import Any

from stable_baselines3.common.vec_env import VecEnvWrapper

__all__ = ["HOOK_CLASS_FLAG", "own_env_class", "unwrap_vec_env"]

#: Set (to True) in the namespace of every env subclass this package swaps into a VecEnv slot (GRPO's reset hook,
#: the worker fault reports), so that messages can name the env's own class.
HOOK_CLASS_FLAG = "_sb3_grpo_hook_class"


def unwrap_vec_env(venv: Any) -> Any:
    """The innermost VecEnv below any ``VecEnvWrapper`` (the one that owns the slots, the worker processes and
    ``reset_infos``); ``venv`` itself when it is not wrapped (or ``None``)."""
    while isinstance(venv, VecEnvWrapper):
        venv = venv.venv
    return venv


def own_env_class(cls: type) -> type:
    """The env's own class: ``cls`` without the subclasses this package swapped in (see :data:`HOOK_CLASS_FLAG`)."""
    return next((c for c in cls.__mro__ if not c.__dict__.get(HOOK_CLASS_FLAG, False)), cls)
