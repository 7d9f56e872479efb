"""Crash-safe saving and clear errors on unreadable files, for all three algorithms."""

from __future__ import annotations

import io
import os
import pathlib
import zipfile
from typing import Any

from sb3_grpo.common.worker_faults import (
    WorkerDiedError,
    close_broken,
    dead_workers,
    describe_dead_workers,
    install_fault_reports,
)

__all__ = ["SafeSaveMixin", "dead_workers"]

#: Seconds ``learn`` waits, after a broken pipe, for the SubprocVecEnv worker behind it to end.
WORKER_EXIT_WAIT = 5.0


class SafeSaveMixin:
    """
    ``save`` writes to a temporary file next to the target and renames it into place only once complete, so a
    save interrupted half-way (crash, KeyboardInterrupt, full disk) never destroys the previous file.
    ``load`` turns a truncated or foreign file into a ``ValueError`` that says what the file is not.
    ``learn`` turns the broken pipe of a dead SubprocVecEnv worker into a :class:`WorkerDiedError` that names the
    worker, says how it ended (the signal that killed it, or the exception its env raised, with the traceback) and
    how to continue (see :mod:`sb3_grpo.common.worker_faults`).
    """

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        env = getattr(self, "env", None)
        try:
            install_fault_reports(env)
            return super().learn(*args, **kwargs)  # type: ignore[misc]
        except (EOFError, ConnectionError) as exc:  # ConnectionError: BrokenPipeError, ConnectionResetError
            dead = dead_workers(env, wait=WORKER_EXIT_WAIT)
            if not dead:
                raise
            how, tracebacks = describe_dead_workers(env, dead)
            close_broken(env, dead)
            raise WorkerDiedError(
                f"SubprocVecEnv worker process(es) {dead} died ({how}), so the env cannot step any more (its other "
                "workers are closed). The model itself is intact: save it, fix or recreate the VecEnv, then "
                "model.set_env(new_env) and model.learn(..., reset_num_timesteps=False)."
                + (f"\n\n{tracebacks}" if tracebacks else "")
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
