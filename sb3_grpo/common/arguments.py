"""The type check of an algorithm's numeric arguments, run first by every constructor.

A number written in quotes in a zoo YAML file or on the command line (``n_steps: "64"``, ``-params beta:"'0.04'"``)
reaches the constructor as a string, and the first comparison then fails with a bare
``TypeError: '<' not supported between instances of 'str' and 'int'``. :func:`check_argument_types` runs first in
each constructor and names the argument, the type it expects and the value it got instead.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from torch import nn

from sb3_grpo.plugin_checks import is_number

__all__ = [
    "ArgumentTypeError",
    "check_argument_types",
    "check_finite_observation",
    "check_policy_kwargs",
    "constructor_arguments",
    "describe_schedule",
]

#: What each kind of argument accepts, as the message says it. A kind ending in ``?`` also accepts ``None``.
_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "schedule": "a number or a schedule (a callable of the remaining progress, 1 to 0)",
    "dict": "a dict of options (e.g. dict(eps=1e-8))",
    "numbers": "a list of numbers (e.g. [1.0, -1.0])",
    "functions": "a reward function (a registered name or a callable of the Trajectory) or a list of them "
    "(e.g. ['episodic_return'])",
    "estimator": "a registered estimator name, an estimator class (or factory) or an estimator instance",
    "policy_loss": "a registered policy loss name (e.g. 'clip'), a policy loss class (or factory) or a policy loss instance",
}
#: The kinds that hold several values: a string for one of them is a list (or dict) written in quotes.
_CONTAINERS = ("dict", "numbers", "functions")


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type. A ``TypeError``, and a ``ValueError`` too (like the algorithms' other argument
    errors), so that code catching either sees it."""


def located(error: ValueError, where: str) -> ValueError:
    """``error`` again, of its own class where that class takes a message alone, its message saying how the argument
    reached the model (``where``, e.g. ``"given to load()"``)."""
    message = f"{error} (an argument {where})"
    try:
        return type(error)(message)
    except TypeError:  # an error class that takes other arguments
        return ValueError(message)


def constructor_arguments(cls: type) -> set[str]:
    """The names of the arguments ``cls``'s constructor takes (without ``self`` and ``_init_setup_model``): what
    ``load`` and :class:`~sb3_grpo.SwitchArguments` may set on a model of the class."""
    return set(inspect.signature(cls.__init__).parameters) - {"self", "_init_setup_model"}  # type: ignore[misc]


def _is_list(value: Any) -> bool:
    """A list, tuple, array or other iterable of values; not a string or a dict."""
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


def _fits(value: Any, kind: str) -> bool:
    if isinstance(value, bool):  # a bool is an int to Python, never a meaningful count or coefficient
        return False
    if kind == "int":
        return isinstance(value, numbers.Integral)
    if kind == "float":
        return isinstance(value, numbers.Real)
    if kind == "dict":
        return isinstance(value, Mapping)
    if kind == "numbers":
        return _is_list(value) and all(_fits(v, "float") for v in value)
    if kind == "functions":
        return _fits(value, "function") or (_is_list(value) and all(_fits(v, "function") for v in value))
    if kind == "function":
        return isinstance(value, str) or callable(value)
    if kind == "estimator":
        return isinstance(value, str) or callable(value) or (hasattr(value, "compute") and hasattr(value, "requires"))
    if kind == "policy_loss":
        return isinstance(value, str) or callable(value) or callable(getattr(value, "compute", None))
    return isinstance(value, numbers.Real) or callable(value)  # "schedule"


def check_argument_types(algorithm: str, arguments: Mapping[str, tuple[Any, str]]) -> None:
    """Raise :class:`ArgumentTypeError` for the first argument whose value is not of the kind expected.

    :param algorithm: the algorithm's name, which starts the message.
    :param arguments: ``name -> (value, kind)``, kind one of ``"int"``, ``"float"`` (any real number),
        ``"schedule"`` (a real number or a callable), ``"dict"`` (options), ``"numbers"`` (a list of real numbers),
        ``"functions"`` (reward functions: one name or callable, or a list of them), ``"estimator"`` or
        ``"policy_loss"`` (a name, a class or factory, or an instance), followed by ``"?"`` where ``None`` is accepted
        too.
    """
    for name, (value, kind) in arguments.items():
        optional = kind.endswith("?")
        kind = kind.rstrip("?")
        if (optional and value is None) or _fits(value, kind):
            continue
        expected = _EXPECTED[kind] + (" or None" if optional else "")
        hint = ""
        if kind in _CONTAINERS and isinstance(value, str):
            written = "a dict" if kind == "dict" else "a list"
            if value.strip()[:1] in "[({" or kind == "numbers":
                hint = (
                    f" {written.capitalize()} in quotes is a string: pass {written}, e.g. {name}={value.strip()} (in a "
                    "zoo YAML file or after -params, without quotes)."
                )
        elif kind in ("numbers", "functions") and _is_list(value):
            bad = [v for v in value if not _fits(v, "float" if kind == "numbers" else "function")]
            hint = f" These entries are not: {bad!r}." if bad else ""
        elif isinstance(value, str) and kind not in ("estimator", "functions", "policy_loss") and is_number(value):
            hint = (
                f" A number in quotes is a string: write {name}={value.strip()} (in a zoo YAML file or after -params, "
                "without quotes)."
            )
        raise ArgumentTypeError(f"{algorithm}: {name} must be {expected}, got {value!r} (a {type(value).__name__}).{hint}")


def describe_schedule(schedule: Any) -> str:
    """How a message names a schedule: a number as itself, a function by its qualified name, SB3's schedule wrappers
    by what they wrap."""
    inner = getattr(schedule, "value_schedule", None)  # SB3's FloatSchedule
    if inner is not None:
        return describe_schedule(inner)
    if hasattr(schedule, "val") and type(schedule).__name__ == "ConstantSchedule":
        return repr(schedule.val)
    if isinstance(schedule, numbers.Real):
        return repr(schedule)
    name = getattr(schedule, "__qualname__", None)
    if name is not None:
        module = getattr(schedule, "__module__", None)
        return f"{module}.{name}" if module and module != "builtins" else name
    return repr(schedule)


def check_policy_kwargs(algorithm: str, policy_kwargs: Any) -> None:
    """Refuse ``policy_kwargs`` that SB3 would only reject deep inside the network's construction, or accept and
    train uselessly: not a dict, an ``activation_fn`` that is not a ``torch.nn.Module`` class (e.g. the string
    ``"tanh"``), a layer size of 0 or less in ``net_arch`` (a policy that cannot see the state)."""
    if policy_kwargs is None:
        return
    if not isinstance(policy_kwargs, Mapping):
        raise ArgumentTypeError(
            f"{algorithm}: policy_kwargs must be a dict (e.g. dict(net_arch=[64, 64])), got {policy_kwargs!r} "
            f"(a {type(policy_kwargs).__name__})."
        )
    activation = policy_kwargs.get("activation_fn")
    if activation is not None and not (isinstance(activation, type) and issubclass(activation, nn.Module)):
        suggestion = ""
        if isinstance(activation, str):
            wanted = activation.strip().lower().removeprefix("torch.").removeprefix("nn.")
            match = next((n for n in dir(nn) if n.lower() == wanted and isinstance(getattr(nn, n), type)), None)
            if match is not None:
                suggestion = (
                    f" Write activation_fn=torch.nn.{match} (in a zoo YAML file: policy_kwargs: "
                    f'"dict(activation_fn=nn.{match})").'
                )
        raise ArgumentTypeError(
            f"{algorithm}: policy_kwargs['activation_fn'] must be a torch.nn.Module class such as torch.nn.Tanh or "
            f"torch.nn.ReLU (the class, not an instance or a name), got {activation!r}.{suggestion}"
        )
    net_arch = policy_kwargs.get("net_arch")
    layers: list[Any] = []
    if isinstance(net_arch, Mapping):
        layers = [size for part in net_arch.values() if isinstance(part, (list, tuple)) for size in part]
    elif isinstance(net_arch, (list, tuple)):
        for entry in net_arch:
            if isinstance(entry, Mapping):  # SB3's older [dict(pi=[...], vf=[...])]
                layers += [size for part in entry.values() if isinstance(part, (list, tuple)) for size in part]
            else:
                layers.append(entry)
    bad = [size for size in layers if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < 1]
    if bad:
        raise ValueError(
            f"{algorithm}: policy_kwargs['net_arch'] = {net_arch!r} has layer size(s) {bad!r}: net_arch must be a list of "
            "positive layer sizes (integers >= 1: a layer of 0 units cuts the network off from the observation), or "
            "dict(pi=[...], vf=[...]) of such lists. Use [] for no hidden layer."
        )


def check_finite_observation(algorithm: str, observation: Any) -> None:
    """Refuse an observation handed to ``predict`` that holds NaN or inf, naming the key and the index."""
    parts = observation.items() if isinstance(observation, Mapping) else [(None, observation)]
    for key, value in parts:
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "fc":
            continue
        finite = np.isfinite(value)
        if finite.all():
            continue
        index = tuple(int(i) for i in np.argwhere(~finite)[0])
        where = f"observation[{key!r}]" if key is not None else "the observation"
        raise ValueError(
            f"{algorithm}.predict: {where} holds {value[index].item()!r} at index {index}: a policy cannot act on a "
            "non-finite observation. Check what produced it (the env's step or reset, an observation wrapper, VecNormalize "
            "statistics)."
        )
