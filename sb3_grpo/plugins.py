"""
The plugin manager of sb3_grpo, and the registries it feeds.

- One :class:`pluggy.PluginManager` (``pm``) with the hooks of :mod:`sb3_grpo.hookspecs`.
- Built-in plugins (:data:`DEFAULT_PLUGINS`) register through the very same hooks as third-party ones.
- Third-party plugins are found through the entry-point group ``sb3_grpo``. Loading happens once, lazily, the
  first time a name is looked up or listed. Installed plugins run code when imported, so loading can be
  restricted with the environment variable ``SB3_GRPO_LOAD_PLUGINS``: unset loads every installed plugin; a
  comma-separated list of entry-point names loads only those; an empty string loads none (built-ins always load).
- Objects can also be registered in-process (tests, notebooks): :func:`register_advantage_estimator`,
  :func:`register_reward_function`, or a whole plugin object with :func:`register_plugin`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import inspect
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pluggy

from sb3_grpo import hookspecs
from sb3_grpo.common.advantages import NEEDS, AdvantageEstimator
from sb3_grpo.common.rewards import RewardFunctionError, check_reward_function_signature

__all__ = [
    "DEFAULT_PLUGINS",
    "ENTRY_POINT_GROUP",
    "LOAD_PLUGINS_ENV",
    "PluginError",
    "UnknownNameError",
    "available_advantage_estimators",
    "available_reward_functions",
    "available_state_snapshots",
    "get_advantage_estimator",
    "get_reward_function",
    "list_plugins",
    "load_plugins",
    "pm",
    "register_advantage_estimator",
    "register_plugin",
    "register_reward_function",
    "register_state_snapshot",
    "unregister_advantage_estimator",
    "unregister_plugin",
    "unregister_reward_function",
]

ENTRY_POINT_GROUP = "sb3_grpo"
LOAD_PLUGINS_ENV = "SB3_GRPO_LOAD_PLUGINS"
DEFAULT_PLUGINS: tuple[str, ...] = (
    "sb3_grpo.default_plugins.advantage_estimators",
    "sb3_grpo.default_plugins.reward_functions",
    "sb3_grpo.default_plugins.state_snapshots",
    "sb3_grpo.envs.rewards",
)
IN_PROCESS = "<in-process>"


class PluginError(RuntimeError):
    """A plugin could not be loaded, raised while registering, or clashes with another one."""


class UnknownNameError(KeyError):
    """A name that no plugin registered. The message lists the names that exist."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


pm = pluggy.PluginManager("sb3_grpo")
pm.add_hookspecs(hookspecs)

_lock = threading.RLock()
_loaded = False
#: entry-point name -> "distribution version" (for listings and error messages)
_plugin_sources: dict[str, str] = {}


# -------------------------------------------------------------------------
# Loading
# -------------------------------------------------------------------------


def _selected_entry_points() -> list[importlib.metadata.EntryPoint]:
    entry_points = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    wanted = os.environ.get(LOAD_PLUGINS_ENV)
    if wanted is None:
        return entry_points
    names = {name.strip() for name in wanted.split(",") if name.strip()}
    return [ep for ep in entry_points if ep.name in names]


def _entry_point_source(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ep.value
    return f"{dist.metadata['Name']} {dist.version}"


def load_plugins() -> None:
    """Register the built-in plugins and the installed ones (once; later calls do nothing).

    :raises PluginError: if a plugin fails to import, two installed plugins share an entry-point name, or a
        plugin implements a hook that does not exist (a typo in a hook name).
    """
    global _loaded
    with _lock:
        if _loaded:
            return
        for module_name in DEFAULT_PLUGINS:
            if pm.get_plugin(module_name) is None:
                pm.register(importlib.import_module(module_name), name=module_name)
        seen: dict[str, str] = {}
        for ep in _selected_entry_points():
            source = _entry_point_source(ep)
            if ep.name in seen:
                raise PluginError(
                    f"Two installed distributions declare the sb3_grpo plugin {ep.name!r}: {seen[ep.name]} and {source}. "
                    "Uninstall one of them."
                )
            seen[ep.name] = source
            if pm.get_plugin(ep.name) is not None:
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginError(
                    f"The sb3_grpo plugin {ep.name!r} ({source}, entry point {ep.value!r}) failed to import: {exc!r}. "
                    f"Fix or uninstall it, or leave it out with {LOAD_PLUGINS_ENV}=<the plugins you want>."
                ) from exc
            pm.register(plugin, name=ep.name)
            _plugin_sources[ep.name] = source
        try:
            pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"A plugin implements a hook that sb3_grpo does not define: {exc}") from exc
        _loaded = True


def list_plugins() -> list[dict[str, str]]:
    """The active plugins: ``[{"name": ..., "source": ...}]`` (built-in, in-process, or the distribution)."""
    load_plugins()
    out = []
    for name, _plugin in pm.list_name_plugin():
        if name in DEFAULT_PLUGINS:
            source = "built-in"
        else:
            source = _plugin_sources.get(name, IN_PROCESS)
        out.append({"name": name, "source": source})
    return out


def register_plugin(plugin: Any, name: str | None = None) -> str:
    """Register a plugin object (a module or instance holding ``@hookimpl`` functions) in this process.

    :return: the name it was registered under (use it with :func:`unregister_plugin`).
    """
    load_plugins()
    with _lock:
        try:
            registered = pm.register(plugin, name=name)
        except ValueError as exc:
            raise PluginError(f"Cannot register plugin {name or plugin!r}: {exc}") from exc
        try:
            pm.check_pending()
        except pluggy.PluginValidationError as exc:
            pm.unregister(name=registered)
            raise PluginError(f"Plugin {registered!r} implements a hook that sb3_grpo does not define: {exc}") from exc
        _invalidate()
        return registered  # type: ignore[return-value]


def unregister_plugin(name: str) -> None:
    """Remove a plugin registered with :func:`register_plugin`."""
    with _lock:
        pm.unregister(name=name)
        _invalidate()


# -------------------------------------------------------------------------
# Registries
# -------------------------------------------------------------------------


@dataclass
class _Entry:
    name: str
    obj: Any
    plugin: str
    shadows: bool = False  # an in-process registration made with replace=True


class _Registry:
    """Names -> objects of one kind, built from one hook plus in-process registrations."""

    def __init__(self, kind: str, hook_name: str, validate: Callable[[str, Any, str], None]):
        self.kind = kind
        self.hook_name = hook_name
        self.validate = validate
        self._entries: dict[str, _Entry] | None = None
        self._local: dict[str, _Entry] = {}

    def _build(self) -> dict[str, _Entry]:
        load_plugins()
        entries: dict[str, _Entry] = {}
        hook = getattr(pm.hook, self.hook_name)
        for impl in hook.get_hookimpls():  # in registration order: built-ins first
            plugin_name = impl.plugin_name

            def register(name: str, obj: Any, _plugin: str = plugin_name) -> None:
                self._add(entries, name, obj, _plugin)

            try:
                impl.function(*[{"register": register}[arg] for arg in impl.argnames])
            except PluginError:
                raise
            except Exception as exc:
                raise PluginError(f"Plugin {plugin_name!r} raised while registering {self.kind}s: {exc!r}") from exc
        for name, entry in self._local.items():
            if name in entries and not entry.shadows:
                raise PluginError(
                    f"The {self.kind} name {name!r} registered in-process is already provided by plugin "
                    f"{entries[name].plugin!r}. Choose another name, or pass replace=True."
                )
            entries[name] = entry
        return entries

    def _add(self, entries: dict[str, _Entry], name: str, obj: Any, plugin: str) -> None:
        if not isinstance(name, str) or not name or name != name.strip():
            raise PluginError(
                f"Plugin {plugin!r} registered a {self.kind} with an invalid name {name!r}: use a non-empty string."
            )
        if name in entries:
            raise PluginError(
                f"Two plugins claim the {self.kind} name {name!r}: {entries[name].plugin!r} and {plugin!r}. "
                f"Uninstall one, or restrict loading with {LOAD_PLUGINS_ENV}."
            )
        try:
            self.validate(name, obj, plugin)
        except (TypeError, ValueError) as exc:
            raise PluginError(f"Plugin {plugin!r} registered an invalid {self.kind} {name!r}: {exc}") from exc
        entries[name] = _Entry(name, obj, plugin)

    @property
    def entries(self) -> dict[str, _Entry]:
        with _lock:
            if self._entries is None:
                self._entries = self._build()
            return self._entries

    def names(self) -> list[str]:
        return sorted(self.entries)

    def lookup(self, name: str) -> _Entry:
        entries = self.entries
        if name not in entries:
            raise UnknownNameError(
                f"Unknown {self.kind} {name!r}. Available: {', '.join(sorted(entries)) or '(none)'}. "
                f"Install or register a plugin that provides it."
            )
        return entries[name]

    def register_local(self, name: str, obj: Any, replace: bool) -> None:
        with _lock:
            if name in self._local and not replace:
                raise PluginError(f"A {self.kind} named {name!r} is already registered in-process; pass replace=True.")
            entries = self.entries
            if name in entries and entries[name].plugin != IN_PROCESS and not replace:
                raise PluginError(
                    f"The {self.kind} name {name!r} is already provided by plugin {entries[name].plugin!r}; "
                    "choose another name, or pass replace=True to shadow it in this process."
                )
            probe: dict[str, _Entry] = {}
            self._add(probe, name, obj, IN_PROCESS)
            probe[name].shadows = replace
            self._local[name] = probe[name]
            if self._entries is not None:
                self._entries[name] = probe[name]

    def unregister_local(self, name: str) -> None:
        with _lock:
            if name not in self._local:
                raise KeyError(f"No {self.kind} named {name!r} was registered in-process.")
            del self._local[name]
            self._entries = None


def _invalidate() -> None:
    for registry in (_estimators, _reward_functions, _snapshots):
        registry._entries = None


def _is_estimator_instance(obj: Any) -> bool:
    return not isinstance(obj, type) and hasattr(obj, "compute") and hasattr(obj, "requires")


def _validate_estimator(name: str, obj: Any, plugin: str) -> None:
    """An estimator is a class (or factory) whose instances have ``requires`` and ``compute(inputs)``."""
    if _is_estimator_instance(obj) or isinstance(obj, type) or callable(obj):
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


def _validate_reward_function(name: str, obj: Any, plugin: str) -> None:
    try:
        check_reward_function_signature(obj, name)
    except RewardFunctionError as exc:
        raise TypeError(str(exc)) from None


_estimators = _Registry("advantage estimator", "register_advantage_estimators", _validate_estimator)
_reward_functions = _Registry("reward function", "register_reward_functions", _validate_reward_function)


def _validate_snapshotter(name: str, obj: Any, plugin: str) -> None:
    target = obj
    if isinstance(obj, type):
        try:
            target = obj()
        except TypeError as exc:
            raise TypeError(f"{obj.__name__} must be constructible without arguments ({exc})") from None
    missing = [m for m in ("supports", "get", "set") if not callable(getattr(target, m, None))]
    if missing:
        raise TypeError(f"a state snapshotter needs supports(env), get(env) and set(env, state); missing {missing}")


_snapshots = _Registry("state snapshotter", "register_state_snapshots", _validate_snapshotter)


# -------------------------------------------------------------------------
# Public API
# -------------------------------------------------------------------------


def available_advantage_estimators() -> list[str]:
    """Names of every registered advantage estimator (built-in, installed plugins, in-process)."""
    return _estimators.names()


def available_reward_functions() -> list[str]:
    """Names of every registered reward function (built-in, installed plugins, in-process)."""
    return _reward_functions.names()


def get_advantage_estimator(name_or_obj: Any, **kwargs: Any) -> Any:
    """Resolve an advantage estimator and instantiate it.

    :param name_or_obj: a registered name (``"gae"``, ``"group_zscore"``, ...), an estimator class, or an
        estimator instance (returned as is).
    :param kwargs: the estimator's options (``advantage_kwargs``); not allowed with an instance.
    :return: an estimator instance with ``requires`` and ``compute(inputs)``.
    :raises KeyError: for an unknown name, listing the names that exist.
    :raises TypeError: for options the estimator does not accept, or an object that is not an estimator.
    """
    plugin = None
    if isinstance(name_or_obj, str):
        entry = _estimators.lookup(name_or_obj)
        factory, label, plugin = entry.obj, name_or_obj, entry.plugin
    else:
        _validate_estimator(getattr(name_or_obj, "__name__", type(name_or_obj).__name__), name_or_obj, IN_PROCESS)
        factory, label = name_or_obj, getattr(name_or_obj, "__name__", type(name_or_obj).__name__)
    if _is_estimator_instance(factory):
        if kwargs:
            raise TypeError(f"advantage_kwargs {sorted(kwargs)} cannot be applied to the estimator instance {factory!r}.")
        return _stamp(factory, name_or_obj, plugin)
    try:
        signature = inspect.signature(factory)
        signature.bind(**kwargs)
    except TypeError:
        accepted = [p for p in inspect.signature(factory).parameters if p not in ("self", "args", "kwargs")]
        raise TypeError(
            f"Advantage estimator {label!r} does not accept advantage_kwargs {sorted(kwargs)}; it accepts: "
            f"{', '.join(accepted) or '(no options)'}."
        ) from None
    except ValueError:
        pass
    estimator = factory(**kwargs)
    if not _is_estimator_instance(estimator):
        raise TypeError(f"Advantage estimator {label!r} produced {estimator!r}, which has no requires/compute.")
    return _stamp(estimator, name_or_obj, plugin)


def _stamp(estimator: Any, name_or_obj: Any, plugin: str | None) -> Any:
    """Remember the registered name and the plugin that registered it, for error messages (see ``estimator_name``)."""
    if isinstance(name_or_obj, str):
        with contextlib.suppress(AttributeError):  # objects with __slots__ keep no name
            estimator._registered_name = name_or_obj
            estimator._registered_plugin = plugin
    return estimator


def get_reward_function(name_or_obj: Any) -> Callable:
    """Resolve a reward function by name, or check and return a callable.

    :raises KeyError: for an unknown name, listing the names that exist.
    :raises RewardFunctionError: for a callable with the wrong signature.
    """
    if isinstance(name_or_obj, str):
        return _reward_functions.lookup(name_or_obj).obj
    check_reward_function_signature(name_or_obj)
    return name_or_obj


def register_advantage_estimator(name: str, estimator: Any, replace: bool = False) -> None:
    """Register an estimator class (or instance) under ``name`` in this process (tests, notebooks).

    :param replace: shadow an estimator of the same name from a plugin.
    """
    _estimators.register_local(name, estimator, replace)


def unregister_advantage_estimator(name: str) -> None:
    """Remove an estimator registered with :func:`register_advantage_estimator`."""
    _estimators.unregister_local(name)


def register_reward_function(name: str, function: Callable, replace: bool = False) -> None:
    """Register a reward function under ``name`` in this process (tests, notebooks)."""
    _reward_functions.register_local(name, function, replace)


def unregister_reward_function(name: str) -> None:
    """Remove a reward function registered with :func:`register_reward_function`."""
    _reward_functions.unregister_local(name)


def available_state_snapshots() -> list[str]:
    """Names of every registered state snapshotter (for branching groups)."""
    return _snapshots.names()


def register_state_snapshot(name: str, snapshotter: Any, replace: bool = False) -> None:
    """Register a state snapshotter in this process (see the ``register_state_snapshots`` hook)."""
    _snapshots.register_local(name, snapshotter, replace)


def _reset_for_tests() -> None:
    """Forget everything loaded (the next lookup loads again). For the test suite only."""
    global _loaded
    with _lock:
        for name, _plugin in list(pm.list_name_plugin()):
            pm.unregister(name=name)
        _plugin_sources.clear()
        _loaded = False
        _estimators._local.clear()
        _reward_functions._local.clear()
        _snapshots._local.clear()
        _invalidate()


# Re-exported for convenience: the base class of estimators.
__all__ += ["AdvantageEstimator"]
