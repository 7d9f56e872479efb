"""VecEnv helpers shared by the algorithms."""

from __future__ import annotations

import importlib
from typing import Any

from stable_baselines3.common.vec_env import VecEnvWrapper

__all__ = ["HOOK_CLASS_FLAG", "decode_hook_class_name", "hook_class_name", "own_env_class", "unwrap_vec_env"]

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


def hook_class_name(prefix: str, base: type) -> str:
    """The name of the hook subclass of ``base``: ``prefix`` + the hex of ``module:qualname``, so that a worker
    process can rebuild the class from its name alone (the defining module's ``__getattr__``)."""
    return prefix + f"{base.__module__}:{base.__qualname__}".encode().hex()


def decode_hook_class_name(prefix: str, name: str) -> Any:
    """The base class named in :func:`hook_class_name`'s ``name`` (imported)."""
    module_name, qualname = bytes.fromhex(name[len(prefix) :]).decode().split(":", 1)
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj
