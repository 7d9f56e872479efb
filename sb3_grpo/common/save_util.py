"""Crash-safe saving and clear errors on unreadable files, for all three algorithms."""

from __future__ import annotations

import io
import os
import pathlib
import zipfile
from typing import Any

from sb3_grpo.common.saved_models import (
    SAVED_BY_KEY,
    RecordSavedByMixin,
    check_saved_class,
    prepare_custom_objects,
    read_saved_data,
)
from sb3_grpo.plugins import UnknownNameError

__all__ = ["SafeSaveMixin", "dead_workers"]


def dead_workers(env: Any) -> list[int]:
    """Indices of the SubprocVecEnv worker processes under ``env`` (through VecEnv wrappers) that are not alive."""
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecEnvWrapper

    while isinstance(env, VecEnvWrapper):
        env = env.venv
    if not isinstance(env, SubprocVecEnv):
        return []
    return [i for i, process in enumerate(env.processes) if not process.is_alive()]


class SafeSaveMixin(RecordSavedByMixin):
    """
    ``save`` writes to a temporary file next to the target and renames it into place only once complete, so a
    save interrupted half-way (crash, KeyboardInterrupt, full disk) never destroys the previous file; it records
    the class that saved the file (see :mod:`sb3_grpo.common.saved_models`).
    ``load`` turns a truncated or foreign file into a ``ValueError`` that says what the file is not, refuses a file
    saved by another algorithm (naming it), and never unpickles code of a plugin that is switched off.
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
    def load(
        cls,
        path: Any,
        env: Any = None,
        device: Any = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> Any:
        data = read_saved_data(path)
        if data is not None:
            check_saved_class(cls, data, path)
            custom_objects = prepare_custom_objects(cls, data, path, custom_objects)
        try:
            model = super().load(  # type: ignore[misc]
                path,
                env=env,
                device=device,
                custom_objects=custom_objects,
                print_system_info=print_system_info,
                force_reset=force_reset,
                **kwargs,
            )
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
