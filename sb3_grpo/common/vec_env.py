"""VecEnv helpers shared by the algorithms."""

from __future__ import annotations

from typing import Any

from stable_baselines3.common.vec_env import VecEnvWrapper

__all__ = ["unwrap_vec_env"]


def unwrap_vec_env(venv: Any) -> Any:
    """The innermost VecEnv below any ``VecEnvWrapper`` (the one that owns the slots, the worker processes and
    ``reset_infos``); ``venv`` itself when it is not wrapped (or ``None``)."""
    while isinstance(venv, VecEnvWrapper):
        venv = venv.venv
    return venv
