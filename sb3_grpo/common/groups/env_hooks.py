"""
Seeded resets inside any SB3 VecEnv slot, so that the members of a group (GRPO, OnlineDPO) start from the same
state.

SB3's VecEnvs reset a slot automatically when its episode ends, without a seed, and the wrappers stacked on
the VecEnv (``VecNormalize``, ``VecFrameStack``, ``VecMonitor``) see that reset as part of ``step``. To put a
group's start state into a slot *through* that automatic reset, every slot's outermost env gets a reset hook:

1. Its class is swapped (via ``VecEnv.set_attr("__class__", ...)``, which works for ``DummyVecEnv`` and, across
   the pipe, for ``SubprocVecEnv``) for a subclass whose ``reset`` honours a scheduled seed. The subclass is created on
   demand and is picklable by name (this module's ``__getattr__`` rebuilds it in a worker process).
2. Before the slot's current trajectory ends, the scheduler calls
   ``env_method("sb3_grpo_schedule_reset", seed, ticket, indices=[i])``. The next ``reset()`` of that env, be it
   the automatic one inside ``step`` or an explicit ``VecEnv.reset()``, uses that seed, whatever seed it was
   given, and reports ``(ticket, seed, digest of the first observation)`` in its reset info under
   :data:`INFO_KEY`. Without a pending request the env resets exactly as before.

Everything above the slot sees an ordinary reset, so wrappers stay consistent. The digest lets the algorithm
check that all members of a group really started from the same observation.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from sb3_grpo.common.vec_env import HOOK_CLASS_FLAG, decode_hook_class_name, hook_class_name, unwrap_vec_env

__all__ = [
    "INFO_KEY",
    "group_reset_class",
    "install_group_reset",
    "is_group_reset_class",
    "observation_digest",
]

#: Key of the reset-info entry ``(ticket, seed, digest)`` written by a scheduled reset.
INFO_KEY = "sb3_grpo_reset"
_PENDING = "_sb3_grpo_pending_reset"
_SNAPSHOTTER = "_sb3_grpo_snapshotter"
_PREFIX = "GroupReset_"


def observation_digest(obs: Any) -> str:
    """A short, exact fingerprint of an observation (array, dict or tuple of arrays)."""
    h = hashlib.blake2b(digest_size=12)
    if isinstance(obs, dict):
        for key in sorted(obs):
            h.update(str(key).encode())
            h.update(np.ascontiguousarray(obs[key]).tobytes())
    elif isinstance(obs, tuple):
        for part in obs:
            h.update(np.ascontiguousarray(part).tobytes())
    else:
        h.update(np.ascontiguousarray(obs).tobytes())
    return h.hexdigest()


def _schedule_reset(self: Any, seed: int | None, ticket: int) -> None:
    """Make the next ``reset()`` use ``seed`` and report ``ticket``; ``seed=None`` cancels a pending request."""
    if seed is None:
        self.__dict__.pop(_PENDING, None)
    else:
        self.__dict__[_PENDING] = (int(seed), int(ticket))


def _snapshotter(self: Any) -> Any:
    found = self.__dict__.get(_SNAPSHOTTER)
    if found is None:
        from sb3_grpo.common.snapshots import find_snapshotter

        found = self.__dict__[_SNAPSHOTTER] = find_snapshotter(self)[1]
    return found


def _snapshot(self: Any) -> Any:
    """The env's current state (see the ``register_state_snapshots`` hook)."""
    return _snapshotter(self).get(self)


def _check_snapshots(self: Any) -> str | Exception:
    """Name of the snapshotter this env would use, or the ``SnapshotError`` that says why there is none (returned, not
    raised: in a SubprocVecEnv worker an exception would kill the worker instead of reaching the user)."""
    from sb3_grpo.common.snapshots import SnapshotError, find_snapshotter

    try:
        name, found = find_snapshotter(self)
    except SnapshotError as exc:
        return exc
    self.__dict__[_SNAPSHOTTER] = found
    return name


def _schedule_restore(self: Any, snapshot: Any, ticket: int) -> None:
    """Make the next ``reset()`` restore ``snapshot`` (after an ordinary reset) and report ``ticket``."""
    self.__dict__[_PENDING] = ("restore", snapshot, int(ticket))


def _make_reset(cls: type) -> Any:
    # Keywords are passed on as given, as SB3's VecEnvs do: ``options`` only when there are options, so an env whose
    # ``reset(self, seed=None)`` takes no ``options`` works as it does under SB3 (DummyVecEnv's automatic reset passes
    # no keyword at all). A scheduled reset replaces only ``seed``.
    def reset(self: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if kwargs.get("options") is None:
            kwargs.pop("options", None)
        pending = self.__dict__.pop(_PENDING, None)
        if pending is None:
            return super(cls, self).reset(**kwargs)  # type: ignore[arg-type]  # cls is built at run time
        if pending[0] == "restore":
            _, info = super(cls, self).reset(**{**kwargs, "seed": None})  # type: ignore[arg-type]
            obs = _snapshotter(self).set(self, pending[1])
            info = dict(info)
            info[INFO_KEY] = (pending[2], -1, observation_digest(obs))
            return obs, info
        obs, info = super(cls, self).reset(**{**kwargs, "seed": pending[0]})  # type: ignore[arg-type]
        info = dict(info)
        info[INFO_KEY] = (pending[1], pending[0], observation_digest(obs))
        return obs, info

    return reset


def is_group_reset_class(cls: type) -> bool:
    """Whether ``cls`` already carries the scheduled-reset hook."""
    return bool(getattr(cls, "_sb3_grpo_group_reset", False))


_classes: dict[str, type] = {}


def group_reset_class(base: type) -> type:
    """The subclass of ``base`` whose ``reset`` honours a scheduled seed or snapshot (created once, picklable by
    reference)."""
    if is_group_reset_class(base):
        return base
    if "<locals>" in base.__qualname__:
        raise TypeError(
            f"sb3_grpo cannot install its group-reset hook on {base.__module__}.{base.__qualname__}: the class is defined "
            "inside a function, so worker processes cannot import it. Define the env (or wrapper) class at module level."
        )
    name = hook_class_name(_PREFIX, base)
    cls = _classes.get(name)
    if cls is None:
        # A plain subclass (no mixin base, no __slots__) keeps the env's object layout, so __class__ can be swapped.
        namespace = {"__module__": __name__, "__qualname__": name, "_sb3_grpo_group_reset": True, HOOK_CLASS_FLAG: True}
        cls = type(name, (base,), namespace)
        cls.sb3_grpo_schedule_reset = _schedule_reset  # type: ignore[attr-defined]
        cls.sb3_grpo_schedule_restore = _schedule_restore  # type: ignore[attr-defined]
        cls.sb3_grpo_snapshot = _snapshot  # type: ignore[attr-defined]
        cls.sb3_grpo_check_snapshots = _check_snapshots  # type: ignore[attr-defined]
        cls.reset = _make_reset(cls)  # type: ignore[attr-defined]
        _classes[name] = cls
    return cls


def __getattr__(name: str) -> Any:
    # Called by pickle in a worker process to find a class made by group_reset_class in the parent process.
    if name.startswith(_PREFIX):
        if name not in _classes:
            group_reset_class(decode_hook_class_name(_PREFIX, name))
        return _classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def install_group_reset(venv: VecEnv) -> None:
    """Give every slot of ``venv`` the scheduled-reset hook (idempotent).

    :raises TypeError: if the VecEnv does not let its envs' attributes be read and set (``get_attr``/``set_attr``).
    """
    try:
        classes = venv.get_attr("__class__")
    except Exception as exc:  # pragma: no cover - exotic VecEnvs
        raise TypeError(
            f"Group sampling needs to reset each slot of the VecEnv with a group's seed, but "
            f"{type(unwrap_vec_env(venv)).__name__} does not expose its envs through get_attr/set_attr ({exc!r}). "
            "Use DummyVecEnv or SubprocVecEnv."
        ) from exc
    for index, cls in enumerate(classes):
        if not is_group_reset_class(cls):
            venv.set_attr("__class__", group_reset_class(cls), indices=[index])
