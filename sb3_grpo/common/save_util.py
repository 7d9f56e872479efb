"""Crash-safe saving and clear errors on unreadable files, for all three algorithms."""

from __future__ import annotations

import io
import os
import pathlib
import zipfile
from typing import Any

__all__ = ["SafeSaveMixin", "dead_workers"]


def dead_workers(env: Any) -> list[int]:
    """Indices of the SubprocVecEnv worker processes under ``env`` (through VecEnv wrappers) that are not alive."""
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecEnvWrapper

    while isinstance(env, VecEnvWrapper):
        env = env.venv
    if not isinstance(env, SubprocVecEnv):
        return []
    return [i for i, process in enumerate(env.processes) if not process.is_alive()]


class SafeSaveMixin:
    """
    ``save`` writes to a temporary file next to the target and renames it into place only once complete, so a
    save interrupted half-way (crash, KeyboardInterrupt, full disk) never destroys the previous file.
    ``load`` turns a truncated or foreign file into a ``ValueError`` that says what the file is not.
    ``learn`` turns the broken pipe of a dead SubprocVecEnv worker into an error that says what happened and how
    to continue.
    """

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().learn(*args, **kwargs)  # type: ignore[misc]
        except (BrokenPipeError, EOFError, ConnectionResetError) as exc:
            dead = dead_workers(getattr(self, "env", None))
            if not dead:
                raise
            raise RuntimeError(
                f"SubprocVecEnv worker process(es) {dead} died (crashed or were killed), so the env cannot step any more. "
                "The model itself is intact: save it, recreate the VecEnv, then model.set_env(new_env) and "
                "model.learn(..., reset_num_timesteps=False)."
            ) from exc

    def save(self, path: str | pathlib.Path | io.BufferedIOBase, exclude: Any = None, include: Any = None) -> None:
        if isinstance(path, io.BufferedIOBase):
            super().save(path, exclude=exclude, include=include)  # type: ignore[misc]
            return
        final = pathlib.Path(path)
        if final.suffix == "":
            final = final.with_suffix(".zip")  # as SB3 does
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.with_name(f".{final.name}.partial-{os.getpid()}.zip")
        try:
            super().save(partial, exclude=exclude, include=include)  # type: ignore[misc]
            os.replace(partial, final)
        finally:
            if partial.exists():
                partial.unlink()

    @classmethod
    def load(cls, path: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().load(path, *args, **kwargs)  # type: ignore[misc]
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
            raise ValueError(
                f"Cannot load {path!s} as a {cls.__name__} model: the archive lacks {exc}, so it was not written by "
                "model.save() of an SB3 algorithm."
            ) from exc
