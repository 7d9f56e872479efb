"""Crash-safe saving, clear errors on unreadable files, and the dead-worker message, for all three algorithms
(used by :class:`sb3_grpo.common.base_class.AlgorithmMixin`)."""

from __future__ import annotations

import io
import os
import pathlib
import zipfile
from collections.abc import Callable
from typing import Any

from sb3_grpo.common.saved_models import SAVED_BY_KEY, check_saved_class, prepare_custom_objects, read_saved_data
from sb3_grpo.common.vec_env import unwrap_vec_env
from sb3_grpo.plugins import UnknownNameError

__all__ = ["atomic_save", "dead_workers", "load_checked", "raise_if_workers_died"]


def dead_workers(env: Any) -> list[int]:
    """Indices of the SubprocVecEnv worker processes under ``env`` (through VecEnv wrappers) that are not alive."""
    from stable_baselines3.common.vec_env import SubprocVecEnv

    base = unwrap_vec_env(env)
    if not isinstance(base, SubprocVecEnv):
        return []
    return [i for i, process in enumerate(base.processes) if not process.is_alive()]


def raise_if_workers_died(env: Any, exc: BaseException) -> None:
    """Turn the broken pipe of a dead SubprocVecEnv worker into an error that says what happened and how to go on
    (returns when no worker died: the caller re-raises ``exc``)."""
    dead = dead_workers(env)
    if dead:
        raise RuntimeError(
            f"SubprocVecEnv worker process(es) {dead} died (crashed or were killed), so the env cannot step any more. "
            "The model itself is intact: save it, recreate the VecEnv, then model.set_env(new_env) and "
            "model.learn(..., reset_num_timesteps=False)."
        ) from exc


def atomic_save(save: Callable[[Any], None], path: str | pathlib.Path | io.BufferedIOBase) -> None:
    """Run ``save(target)`` into a temporary file next to ``path`` and rename it into place only once complete, so a
    save interrupted half-way (crash, KeyboardInterrupt, full disk) never destroys the previous file (a file object
    is written directly)."""
    if isinstance(path, io.BufferedIOBase):
        save(path)
        return
    final = pathlib.Path(path)
    if final.suffix == "":
        final = final.with_suffix(".zip")  # as SB3 does
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(f".{final.name}.partial-{os.getpid()}.zip")
    try:
        save(partial)
        os.replace(partial, final)
    finally:
        if partial.exists():
            partial.unlink()


def load_checked(
    cls: type, path: Any, custom_objects: dict[str, Any] | None, sb3_load: Callable[[dict[str, Any] | None], Any]
) -> Any:
    """SB3's ``load`` (``sb3_load(custom_objects)``), after refusing a file saved by another algorithm and unpickling
    plugin objects with the guard of :func:`~sb3_grpo.common.saved_models.prepare_custom_objects`; a truncated or
    foreign file becomes a ``ValueError`` that says what the file is not."""
    data = read_saved_data(path)
    if data is not None:
        check_saved_class(cls, data, path)
        custom_objects = prepare_custom_objects(cls, data, path, custom_objects)
    try:
        model = sb3_load(custom_objects)
    except ValueError as exc:
        if "zip" not in str(exc):
            raise  # e.g. spaces that do not match: SB3's own message is clear
        raise ValueError(
            f"Cannot load {path!s} as a {cls.__name__} model: the file is truncated or is not a model saved by "
            f"model.save() ({exc})."
        ) from exc
    except (zipfile.BadZipFile, EOFError, AssertionError) as exc:
        raise ValueError(
            f"Cannot load {path!s} as a {cls.__name__} model: the file is truncated or is not a model saved by "
            f"model.save() ({exc}). Load an intact checkpoint instead (an interrupted save leaves the previous file "
            "in place)."
        ) from exc
    except KeyError as exc:
        if isinstance(exc, UnknownNameError):
            raise  # a name no plugin provides: its own message says which and what exists
        raise ValueError(
            f"Cannot load {path!s} as a {cls.__name__} model: the archive lacks {exc}, so it was not written by "
            "model.save() of an SB3 algorithm."
        ) from exc
    model.__dict__.pop(SAVED_BY_KEY, None)
    return model
