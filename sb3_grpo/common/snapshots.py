"""
State snapshots: save and restore everything an env's next steps depend on (GRPO's branching groups).

Snapshotters are registered through the ``register_state_snapshots`` hook (see :mod:`sb3_grpo.hookspecs`);
:func:`find_snapshotter` picks the first one that supports a given env.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from sb3_grpo.common.vec_env import own_env_class

__all__ = ["SnapshotError", "StateSnapshotter", "find_snapshotter", "get_episode_clock", "set_episode_clock"]


class SnapshotError(RuntimeError):
    """No snapshotter supports an env, or a snapshot could not be restored."""


class StateSnapshotter:
    """Base class of state snapshotters (see the ``register_state_snapshots`` hook)."""

    def supports(self, env: gym.Env) -> bool:
        raise NotImplementedError

    def get(self, env: gym.Env) -> Any:
        raise NotImplementedError

    def set(self, env: gym.Env, state: Any) -> Any:
        raise NotImplementedError


def _wrappers(env: gym.Env) -> list[gym.Env]:
    chain: list[gym.Env] = []
    while isinstance(env, gym.Wrapper):
        chain.append(env)
        env = env.env
    return chain


def get_episode_clock(env: gym.Env) -> list[int]:
    """Elapsed steps of every TimeLimit wrapper in the stack (outermost first)."""
    return [int(w._elapsed_steps or 0) for w in _wrappers(env) if isinstance(w, gym.wrappers.TimeLimit)]


def set_episode_clock(env: gym.Env, clock: list[int]) -> None:
    """Restore what :func:`get_episode_clock` returned."""
    limits = [w for w in _wrappers(env) if isinstance(w, gym.wrappers.TimeLimit)]
    if len(limits) != len(clock):
        raise SnapshotError(f"The snapshot has {len(clock)} TimeLimit clocks but the env has {len(limits)}.")
    for wrapper, elapsed in zip(limits, clock, strict=True):
        wrapper._elapsed_steps = elapsed  # type: ignore[assignment]  # gymnasium's TimeLimit types it as its initial None


def observation_wrappers(env: gym.Env) -> list[str]:
    """Names of wrappers in the stack that transform observations (a restored core state bypasses them)."""
    return [type(w).__name__ for w in _wrappers(env) if isinstance(w, gym.ObservationWrapper)]


def find_snapshotter(env: gym.Env) -> tuple[str, Any]:
    """The first registered snapshotter that supports ``env``, as ``(name, snapshotter)``.

    :raises SnapshotError: naming the env and the hook to implement when none does.
    """
    from sb3_grpo.plugins import registered_state_snapshotters

    obs_wrappers = observation_wrappers(env)
    if obs_wrappers:
        raise SnapshotError(
            f"Branching groups restore the core env's state, which would bypass the observation wrappers "
            f"{obs_wrappers} of {env}. Apply observation transforms as VecEnv wrappers (e.g. VecNormalize) instead."
        )
    registered = registered_state_snapshotters()
    for name, obj in registered.items():
        snapshotter = obj() if isinstance(obj, type) else obj
        if snapshotter.supports(env):
            return name, snapshotter
    spec = getattr(env, "spec", None)
    cls = own_env_class(type(env.unwrapped))  # not the subclass GRPO's reset hook swapped in
    raise SnapshotError(
        f"No state snapshotter supports the env {getattr(spec, 'id', None) or cls.__name__!r} "
        f"({cls.__module__}.{cls.__qualname__}), so groups cannot branch from its "
        f"states (branch_every). Register one through the 'register_state_snapshots' hook (see "
        f"sb3_grpo.hookspecs) or, in this process, with sb3_grpo.plugins.register_state_snapshot(name, snapshotter) "
        f"(examples/branching_custom_env.py), or train without branch_every. "
        f"Available: {', '.join(sorted(registered))}."
    )
