"""Built-in plugins, registered through the same hooks as third-party ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["register_each"]


def register_each(register: Callable[[str, Any], None], table: Mapping[str, Any]) -> None:
    """Call a hook's ``register(name, obj)`` for each entry of ``table`` (name -> object), in the table's order: the
    body of a hook that registers a table of built-ins."""
    for name, obj in table.items():
        register(name, obj)
