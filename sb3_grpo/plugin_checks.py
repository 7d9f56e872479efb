"""
What the objects that plugins register must be: the checks the registries of :mod:`sb3_grpo.plugins` run.

The bottom layer with :mod:`sb3_grpo.hookspecs` (it imports nothing else of sb3_grpo): the plugin manager checks
what a hook registers with these functions, and the interfaces in :mod:`sb3_grpo.common` (advantage estimators,
reward functions, state snapshotters) build on the same definitions.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = [
    "NEEDS",
    "RewardFunctionError",
    "check_estimator",
    "check_reward_function",
    "check_reward_function_signature",
    "check_snapshotter",
    "function_name",
    "is_estimator_instance",
]

#: What an estimator may need, with the words used in error messages.
NEEDS: dict[str, str] = {
    "values": "a critic's value estimates",
    "group_ids": "group ids (trajectories sampled in groups that share a start state)",
    "outcome_rewards": "one outcome reward per trajectory",
    "step_rewards": "per-step rewards",
}


class RewardFunctionError(ValueError):
    """A reward function is unusable or returned something unusable."""


def function_name(fn: Any) -> str:
    return getattr(fn, "_registered_name", None) or getattr(fn, "__name__", None) or type(fn).__name__


def check_reward_function_signature(fn: Any, name: str | None = None) -> None:
    """Refuse anything that cannot be called as ``fn(trajectory)``.

    :raises RewardFunctionError: naming the function and its signature.
    """
    label = name or function_name(fn)
    if not callable(fn):
        raise RewardFunctionError(f"Reward function {label!r} is not callable (got {type(fn).__name__}).")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without a signature: give them the benefit of the doubt
    try:
        signature.bind(None)
    except TypeError:
        raise RewardFunctionError(
            f"Reward function {label!r} must accept exactly one argument, the Trajectory; its signature is {label}{signature}."
        ) from None


def is_estimator_instance(obj: Any) -> bool:
    return not isinstance(obj, type) and hasattr(obj, "compute") and hasattr(obj, "requires")


def check_estimator(name: str, obj: Any, plugin: str) -> None:
    """An estimator is a class (or factory) whose instances have ``requires`` and ``compute(inputs)``."""
    if is_estimator_instance(obj) or isinstance(obj, type) or callable(obj):
        target = obj
    else:
        raise TypeError(f"expected an AdvantageEstimator subclass or instance, got {type(obj).__name__}")
    compute = getattr(target, "compute", None)
    if compute is None:
        if isinstance(obj, type):
            raise TypeError(f"{obj.__name__} has no compute(inputs) method")
        return  # a factory function: checked when it is called
    if isinstance(obj, type) and inspect.isabstract(obj):
        raise TypeError(f"{obj.__name__} is abstract (missing {sorted(obj.__abstractmethods__)})")  # type: ignore[attr-defined]  # set by ABCMeta
    try:
        signature = inspect.signature(compute)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        params = list(signature.parameters.values())
        if isinstance(obj, type) and params and params[0].name == "self":
            params = params[1:]
        required = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        accepts_one = len(required) == 1 or (not required and any(p.kind == p.VAR_POSITIONAL for p in params))
        if not accepts_one:
            raise TypeError(
                f"compute must take exactly one argument (the AdvantageInputs); its signature is compute{signature}"
            )
    requires = getattr(target, "requires", None)
    if requires is not None and not isinstance(requires, property):
        unknown = set(requires) - set(NEEDS)
        if unknown:
            raise TypeError(f"requires names unknown needs {sorted(unknown)}; known: {sorted(NEEDS)}")


def check_reward_function(name: str, obj: Any, plugin: str) -> None:
    try:
        check_reward_function_signature(obj, name)
    except RewardFunctionError as exc:
        raise TypeError(str(exc)) from None


def check_snapshotter(name: str, obj: Any, plugin: str) -> None:
    target = obj
    if isinstance(obj, type):
        try:
            target = obj()
        except TypeError as exc:
            raise TypeError(f"{obj.__name__} must be constructible without arguments ({exc})") from None
    missing = [m for m in ("supports", "get", "set") if not callable(getattr(target, m, None))]
    if missing:
        raise TypeError(f"a state snapshotter needs supports(env), get(env) and set(env, state); missing {missing}")
