"""Crash-safe saving, clear errors on unreadable files, and the dead-worker error, for every algorithm
(used by :class:`sb3_grpo.common.base_class.AlgorithmMixin`)."""

from __future__ import annotations

import contextlib
import glob
import io
import os
import pathlib
import re
import socket
import time
import zipfile
from collections.abc import Callable
from typing import Any

from sb3_grpo.common.saved_models import SAVED_BY_KEY, check_saved_class, prepare_custom_objects, read_saved_data
from sb3_grpo.common.worker_faults import WorkerDiedError, close_broken, dead_workers, describe_dead_workers
from sb3_grpo.plugins import UnknownNameError

__all__ = ["atomic_save", "load_checked", "partial_name", "raise_if_workers_died", "remove_stale_partials"]

#: Seconds ``learn`` waits, after a broken pipe, for the SubprocVecEnv worker behind it to end.
WORKER_EXIT_WAIT = 5.0
#: A partial save file older than this (seconds) is stale whoever wrote it (no save takes a day).
STALE_PARTIAL_AGE = 24 * 3600

_HOST = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def partial_name(name: str, pid: int | None = None) -> str:
    """The hidden file ``save`` writes before renaming it to ``name``: ``.<name>.partial-<host>-<pid>.zip``."""
    return f".{name}.partial-{_HOST}-{os.getpid() if pid is None else pid}.zip"


def _process_gone(pid: int) -> bool:
    if os.name != "posix":  # pragma: no cover - no cheap, safe liveness test: rely on the file's age
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except OSError:  # it exists (e.g. another user's)
        return False
    return False


def remove_stale_partials(final: pathlib.Path) -> list[pathlib.Path]:
    """Remove the partial files that earlier saves to ``final`` left behind when they were killed (SIGKILL, power
    loss): those whose writer, a process of this host, is gone, and any older than :data:`STALE_PARTIAL_AGE`. A
    partial file being written right now by another process (another host's, too) is left alone.

    :return: the files removed.
    """
    pattern = re.compile(rf"^\.{re.escape(final.name)}\.partial-(?:(?P<host>[A-Za-z0-9_.]+)-)?(?P<pid>\d+)\.zip$")
    removed: list[pathlib.Path] = []
    try:
        candidates = list(final.parent.glob(f".{glob.escape(final.name)}.partial-*.zip"))
    except OSError:  # pragma: no cover
        return removed
    for path in candidates:
        match = pattern.match(path.name)
        if match is None:
            continue
        pid, host = int(match["pid"]), match["host"]
        if pid == os.getpid() and host in (None, _HOST):
            continue  # this process's own name: the save about to start overwrites it
        try:
            age = time.time() - path.stat().st_mtime
        except OSError:
            continue  # gone already
        if age > STALE_PARTIAL_AGE or (host in (None, _HOST) and _process_gone(pid)):
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
    return removed


def raise_if_workers_died(env: Any, exc: BaseException) -> None:
    """Turn the broken pipe of a dead SubprocVecEnv worker into a :class:`WorkerDiedError` that names the worker,
    says how it ended (the signal that killed it, or the exception its env raised, with the traceback) and how to
    continue (see :mod:`sb3_grpo.common.worker_faults`); returns when no worker died (the caller re-raises ``exc``)."""
    dead = dead_workers(env, wait=WORKER_EXIT_WAIT)
    if not dead:
        return
    how, tracebacks = describe_dead_workers(env, dead)
    close_broken(env, dead)
    raise WorkerDiedError(
        f"SubprocVecEnv worker process(es) {dead} died ({how}), so the env cannot step any more (its other "
        "workers are closed). The model itself is intact: save it, fix or recreate the VecEnv, then "
        "model.set_env(new_env) and model.learn(..., reset_num_timesteps=False)." + (f"\n\n{tracebacks}" if tracebacks else "")
    ) from exc


def atomic_save(save: Callable[[Any], None], path: str | pathlib.Path | io.BufferedIOBase) -> None:
    """Run ``save(target)`` into a temporary file next to ``path`` and rename it into place only once complete, so a
    save interrupted half-way (crash, KeyboardInterrupt, full disk) never destroys the previous file (a file object
    is written directly). The temporary file of a save that was killed outright (SIGKILL) stays behind; the next
    save to the same target removes it (see :func:`remove_stale_partials`)."""
    if isinstance(path, io.BufferedIOBase):
        save(path)
        return
    final = pathlib.Path(path)
    if final.suffix == "":
        final = final.with_suffix(".zip")  # as SB3 does
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(final)
    partial = final.with_name(partial_name(final.name))
    try:
        save(partial)
        os.replace(partial, final)
    finally:
        if partial.exists():
            partial.unlink()


def load_checked(
    cls: type,
    path: Any,
    custom_objects: dict[str, Any] | None,
    sb3_load: Callable[[dict[str, Any] | None, dict[str, Any] | None], Any],
) -> Any:
    """SB3's ``load`` (``sb3_load(custom_objects, data)``, ``data`` the archive's saved arguments as raw JSON or
    ``None``), after refusing a file saved by another algorithm and unpickling plugin objects with the guard of
    :func:`~sb3_grpo.common.saved_models.prepare_custom_objects`; a truncated or foreign file becomes a ``ValueError``
    that says what the file is not."""
    data = read_saved_data(path)
    if data is not None:
        check_saved_class(cls, data, path)
        custom_objects = prepare_custom_objects(cls, data, path, custom_objects)
    try:
        model = sb3_load(custom_objects, data)
    except ValueError as exc:
        if "wasn't a zip-file" not in str(exc):
            raise  # e.g. spaces that do not match, an unknown argument: their own messages are clear
        raise ValueError(
            f"Cannot load {path!s} as a {cls.__name__} model: the file is truncated or is not a model saved by "
            f"model.save() ({exc})."
        ) from exc
    except (zipfile.BadZipFile, EOFError, AssertionError) as exc:
        if isinstance(exc, AssertionError) and data is not None and "found in the saved file" not in str(exc):
            # the archive was read: what SB3 asserted is about the arguments given to load, not about the file
            raise ValueError(f"Cannot load {path!s} as a {cls.__name__} model with the arguments given: {exc}") from exc
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
