"""
SubprocVecEnv workers that die during ``learn``: which one, and why, for every algorithm.

When a worker process dies (killed, or its env raised an exception, which ends SB3's worker loop), the training
process only sees the broken pipe: an ``EOFError``, ``BrokenPipeError`` or ``ConnectionResetError``, and the
worker's traceback goes to the worker's stderr. Two things turn that into a message that names the worker and says
what happened:

1. :func:`install_fault_reports` gives the outermost env of every worker a subclass (swapped in with
   ``set_attr("__class__", ...)``, as GRPO's reset hook is) whose ``step`` and ``reset`` write the traceback of an
   exception to a small file named after the training process and the worker (:func:`fault_file`) before
   re-raising it. The env itself is unchanged otherwise. Envs whose class cannot be swapped safely (defined inside
   a function, without a ``__dict__``) are left alone: their death is still named, without the traceback.
2. :func:`dead_workers` waits briefly for the worker processes to end (right after the broken pipe the dead one may
   not have exited yet) and :func:`describe_dead_workers` says how each ended: killed by which signal, or which
   exception it raised, with the traceback from its file. :func:`close_broken` then closes the VecEnv (a
   SubprocVecEnv cannot replace a dead worker), so that its ``close()`` does not hang on the dead worker's pipe.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import traceback
from typing import Any

from sb3_grpo.common.vec_env import HOOK_CLASS_FLAG, decode_hook_class_name, hook_class_name, unwrap_vec_env

__all__ = [
    "WorkerDiedError",
    "close_broken",
    "dead_workers",
    "describe_dead_workers",
    "fault_file",
    "install_fault_reports",
]

_PREFIX = "WorkerFaults_"
_FLAG = "_sb3_grpo_worker_faults"


class WorkerDiedError(RuntimeError):
    """A SubprocVecEnv worker process died during ``learn`` (the message says which, and why)."""


def fault_file(parent_pid: int, worker_pid: int) -> str:
    """The file where worker ``worker_pid`` of training process ``parent_pid`` writes the traceback it dies of."""
    return os.path.join(tempfile.gettempdir(), f"sb3_grpo_worker_fault_{parent_pid}_{worker_pid}.txt")


def _report() -> None:
    """In a worker, inside an ``except`` block: write the exception's traceback where the training process looks."""
    parent = multiprocessing.parent_process()
    if parent is None or parent.pid is None:
        return
    try:
        with open(fault_file(parent.pid, os.getpid()), "w") as file:
            file.write(traceback.format_exc())
    except OSError:  # pragma: no cover - nowhere to write: the worker still dies with its traceback on stderr
        pass


def _make_class(base: type, name: str) -> type:
    def step(self: Any, action: Any) -> Any:
        try:
            return super(cls, self).step(action)  # type: ignore[arg-type]  # cls is built below, at run time
        except Exception:
            _report()
            raise

    def reset(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return super(cls, self).reset(*args, **kwargs)  # type: ignore[arg-type]
        except Exception:
            _report()
            raise

    cls = type(
        name,
        (base,),
        {"__module__": __name__, "__qualname__": name, _FLAG: True, HOOK_CLASS_FLAG: True, "step": step, "reset": reset},
    )
    return cls


_classes: dict[str, type] = {}


def fault_report_class(base: type) -> type | None:
    """The subclass of ``base`` that reports the exception it dies of, or ``None`` where it cannot be swapped in safely
    (a worker must be able to import ``base`` by name, and an instance of ``base`` must accept the new class)."""
    if getattr(base, _FLAG, False):
        return base
    if "<locals>" in base.__qualname__:
        return None
    if base.__module__ == "__main__" and not hasattr(sys.modules.get("__main__"), "__file__"):
        return None  # a notebook's class: a worker process cannot import it by name
    try:
        if decode_hook_class_name(_PREFIX, hook_class_name(_PREFIX, base)) is not base:
            return None
    except Exception:
        return None
    name = hook_class_name(_PREFIX, base)
    cls = _classes.get(name)
    if cls is None:
        cls = _classes[name] = _make_class(base, name)
    same_layout = all(
        getattr(cls, attr) == getattr(base, attr) for attr in ("__basicsize__", "__dictoffset__", "__weakrefoffset__")
    )
    return cls if same_layout else None


def __getattr__(name: str) -> Any:
    # Called by pickle in a worker process to find a class made by fault_report_class in the training process.
    if name.startswith(_PREFIX):
        if name not in _classes:
            base = decode_hook_class_name(_PREFIX, name)
            _classes[name] = _make_class(base, name)
        return _classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _subproc(env: Any) -> Any:
    from stable_baselines3.common.vec_env import SubprocVecEnv

    env = unwrap_vec_env(env)
    return env if isinstance(env, SubprocVecEnv) else None


def install_fault_reports(env: Any) -> None:
    """Give the outermost env of every SubprocVecEnv worker under ``env`` the reporting subclass (idempotent; nothing
    for other VecEnvs, whose env exceptions reach the caller as they are)."""
    venv = _subproc(env)
    if venv is None or getattr(venv, "closed", False):
        return
    for index, cls in enumerate(venv.get_attr("__class__")):
        if getattr(cls, _FLAG, False):
            continue
        new = fault_report_class(cls)
        if new is not None:
            venv.set_attr("__class__", new, indices=[index])


def dead_workers(env: Any, wait: float = 0.0) -> list[int]:
    """Indices of the SubprocVecEnv worker processes under ``env`` (through VecEnv wrappers) that are not alive.

    :param wait: seconds to wait for a first worker to end (a worker whose pipe just broke may still be exiting);
        once one has ended, the others get a short moment more.
    """
    venv = _subproc(env)
    if venv is None:
        return []
    processes = venv.processes
    deadline = time.monotonic() + wait
    dead = [i for i, process in enumerate(processes) if not process.is_alive()]
    while not dead and time.monotonic() < deadline:
        multiprocessing.connection.wait([p.sentinel for p in processes], timeout=deadline - time.monotonic())
        dead = [i for i, process in enumerate(processes) if not process.is_alive()]
    if dead and wait > 0:
        alive = [p.sentinel for p in processes if p.is_alive()]
        if alive:
            multiprocessing.connection.wait(alive, timeout=0.1)
        dead = [i for i, process in enumerate(processes) if not process.is_alive()]
    return dead


def close_broken(env: Any, dead: list[int], wait: float = 5.0) -> None:
    """Close a SubprocVecEnv whose workers ``dead`` died: the others are asked to close (terminated if they do not
    within ``wait`` seconds), and the VecEnv is marked closed, so that its ``close()`` neither hangs on a pipe that
    never answers nor raises ``BrokenPipeError``."""
    venv = _subproc(env)
    if venv is None or venv.closed:
        return
    for index, (remote, process) in enumerate(zip(venv.remotes, venv.processes, strict=True)):
        if index in dead or not process.is_alive():
            continue
        try:
            while remote.poll(0):  # an answer nobody read (the step that broke off)
                remote.recv()
            remote.send(("close", None))
        except (EOFError, OSError):
            pass
    deadline = time.monotonic() + wait
    for process in venv.processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.terminate()
            process.join(timeout=1.0)
    venv.waiting = False
    venv.closed = True


def describe_dead_workers(env: Any, dead: list[int]) -> tuple[str, str]:
    """How each dead worker ended, as ``(one line per worker, joined; the tracebacks they reported)``; the report files
    are removed once read."""
    venv = _subproc(env)
    if venv is None:
        return "", ""
    summaries, tracebacks = [], []
    for index in dead:
        process = venv.processes[index]
        code = process.exitcode
        text = ""
        path = fault_file(os.getpid(), process.pid) if process.pid is not None else ""
        if path and os.path.exists(path):
            try:
                with open(path) as file:
                    text = file.read().strip()
                os.remove(path)
            except OSError:  # pragma: no cover
                text = ""
        if text:
            summaries.append(f"worker {index} raised {text.splitlines()[-1]}")
            tracebacks.append(f"Worker {index}'s traceback (in its process):\n{text}")
        elif code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            summaries.append(f"worker {index} was killed by {name}")
        elif code:
            summaries.append(f"worker {index} exited with code {code} (its traceback, if any, is on its stderr)")
        else:
            summaries.append(f"worker {index} ended")
    return "; ".join(summaries), "\n\n".join(tracebacks)
