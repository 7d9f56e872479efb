"""The type check of the algorithms' numeric arguments, shared by GRPO, ExactTRPO and AdaptiveKLPPO.

A number written in quotes in a zoo YAML file or on the command line (``n_steps: "64"``, ``-params beta:"'0.04'"``)
reaches the constructor as a string, and the first comparison then fails with a bare
``TypeError: '<' not supported between instances of 'str' and 'int'``. :func:`check_argument_types` runs first in
each constructor and names the argument, the type it expects and the value it got instead.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

__all__ = ["ArgumentTypeError", "check_argument_types"]

#: What each kind of argument accepts, as the message says it. A kind ending in ``?`` also accepts ``None``.
_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "schedule": "a number or a schedule (a callable of the remaining progress, 1 to 0)",
}


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type. A ``TypeError``, and a ``ValueError`` too (like the algorithms' other argument
    errors), so that code catching either sees it."""


def _fits(value: Any, kind: str) -> bool:
    if isinstance(value, bool):  # a bool is an int to Python, never a meaningful count or coefficient
        return False
    if kind == "int":
        return isinstance(value, numbers.Integral)
    if kind == "float":
        return isinstance(value, numbers.Real)
    return isinstance(value, numbers.Real) or callable(value)  # "schedule"


def check_argument_types(algorithm: str, arguments: Mapping[str, tuple[Any, str]]) -> None:
    """Raise :class:`ArgumentTypeError` for the first argument whose value is not of the kind expected.

    :param algorithm: the algorithm's name, which starts the message.
    :param arguments: ``name -> (value, kind)``, kind one of ``"int"``, ``"float"`` (any real number) or
        ``"schedule"`` (a real number or a callable), followed by ``"?"`` where ``None`` is accepted too.
    """
    for name, (value, kind) in arguments.items():
        optional = kind.endswith("?")
        kind = kind.rstrip("?")
        if (optional and value is None) or _fits(value, kind):
            continue
        expected = _EXPECTED[kind] + (" or None" if optional else "")
        hint = ""
        if isinstance(value, str):
            hint = (
                f" A number in quotes is a string: write {name}={value.strip()} (in a zoo YAML file or after -params, "
                "without quotes)."
            )
        raise ArgumentTypeError(f"{algorithm}: {name} must be {expected}, got {value!r} (a {type(value).__name__}).{hint}")
