"""
The plugin manager of sb3_grpo, and the registries it feeds (built here from :mod:`sb3_grpo.plugin_registry`; every
public name of both is imported from this module).

- One :class:`pluggy.PluginManager` (``pm``) with the hooks of :mod:`sb3_grpo.hookspecs`.
- Built-in plugins (:data:`DEFAULT_PLUGINS`) register through the very same hooks as third-party ones.
- Third-party plugins are found through the entry-point group ``sb3_grpo``. Loading happens once, lazily, the
  first time a name is looked up or listed. Installed plugins run code when imported, so loading can be
  restricted with the environment variable ``SB3_GRPO_LOAD_PLUGINS``: unset loads every installed plugin; a
  comma-separated list of entry-point names loads only those; an empty string loads none (built-ins always load).
- Objects can also be registered in-process (tests, notebooks): :func:`register_advantage_estimator`,
  :func:`register_reward_function`, :func:`register_policy_loss`, or a whole plugin object with :func:`register_plugin`.
- A plugin that implements no hook (a function without ``@sb3_grpo.hookimpl``, another project's marker, or an
  entry point naming a module without the hooks) registers nothing: a :class:`PluginWarning` says so and why, at
  load or registration time. :func:`list_plugins` (and ``sb3-grpo plugins`` on the command line) shows what each
  plugin registered.
- An installed plugin that fails (its module raises on import, it implements a hook sb3_grpo does not define, or a hook
  raises or registers an invalid name or object) breaks nothing else: a :class:`PluginWarning` names it, the hook and
  the error when plugins load, what it contributes to that kind is left out, an "unknown name" error of that kind
  mentions it, and :func:`list_plugins` lists it as failed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import os
import types
import warnings
from collections.abc import Callable
from typing import Any

import pluggy

from sb3_grpo import hookspecs
from sb3_grpo.plugin_checks import (
    ESTIMATOR,
    POLICY_LOSS,
    check_reward_function,
    check_reward_function_signature,
    check_snapshotter,
)
from sb3_grpo.plugin_registry import (
    IN_PROCESS,
    LOAD_PLUGINS_ENV,
    FactoryRegistry,
    PluginError,
    PluginHost,
    PluginRecords,
    PluginWarning,
    Registry,
    UnknownNameError,
)
from sb3_grpo.plugin_registry import lock as _lock

__all__ = [
    "DEFAULT_PLUGINS",
    "ENTRY_POINT_GROUP",
    "LOAD_PLUGINS_ENV",
    "PluginError",
    "PluginWarning",
    "UnknownNameError",
    "available_advantage_estimators",
    "available_policy_losses",
    "available_reward_functions",
    "available_state_snapshots",
    "filter_note",
    "get_advantage_estimator",
    "get_policy_loss",
    "get_reward_function",
    "list_plugins",
    "load_plugins",
    "plugin_source",
    "pm",
    "policy_loss_plugin",
    "register_advantage_estimator",
    "register_plugin",
    "register_policy_loss",
    "register_reward_function",
    "register_state_snapshot",
    "registered_advantage_estimators",
    "registered_policy_losses",
    "registered_reward_functions",
    "registered_state_snapshotters",
    "reward_function_plugin",
    "skipped_plugins",
    "unregister_advantage_estimator",
    "unregister_plugin",
    "unregister_policy_loss",
    "unregister_reward_function",
    "unregister_state_snapshot",
]

ENTRY_POINT_GROUP = "sb3_grpo"
DEFAULT_PLUGINS: tuple[str, ...] = (
    "sb3_grpo.default_plugins.advantage_estimators",
    "sb3_grpo.default_plugins.reward_functions",
    "sb3_grpo.default_plugins.state_snapshots",
    "sb3_grpo.default_plugins.policy_losses",
    "sb3_grpo.envs.arithmetic_rewards",
)


pm = pluggy.PluginManager("sb3_grpo")
pm.add_hookspecs(hookspecs)

_loaded = False
#: where each plugin comes from, and those left out or failed (filled while loading)
_records = PluginRecords(DEFAULT_PLUGINS)


# -------------------------------------------------------------------------
# Loading
# -------------------------------------------------------------------------


def _selected_entry_points() -> list[importlib.metadata.EntryPoint]:
    entry_points = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    wanted = os.environ.get(LOAD_PLUGINS_ENV)
    if wanted is None:
        return entry_points
    names = {name.strip() for name in wanted.split(",") if name.strip()}
    installed = sorted({ep.name for ep in entry_points})
    unknown = sorted(names - set(installed))
    if unknown:
        warnings.warn(
            f"{LOAD_PLUGINS_ENV}={wanted!r} names {', '.join(map(repr, unknown))}, which no installed distribution "
            f"provides as an sb3_grpo plugin, so nothing is loaded for {'it' if len(unknown) == 1 else 'them'}. "
            f"Installed sb3_grpo plugins (entry-point names): {', '.join(installed) or '(none)'}.",
            PluginWarning,
            stacklevel=4,
        )
    for ep in entry_points:
        if ep.name not in names:
            _records.skipped[ep.name] = (ep.value.split(":")[0], _entry_point_source(ep))
    return [ep for ep in entry_points if ep.name in names]


def filter_note() -> str:
    """A sentence for "unknown name" errors when ``SB3_GRPO_LOAD_PLUGINS`` restricts loading ("" when it does not)."""
    return _records.filter_note()


def _entry_point_source(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ep.value
    return f"{dist.metadata['Name']} {dist.version}"


def load_plugins() -> None:
    """Register the built-in plugins and the installed ones, and run their hooks (once; later calls do nothing).

    An installed plugin that fails is left out, with a :class:`PluginWarning` naming it, what failed and the error:
    its module raises on import or it implements a hook that sb3_grpo does not define (a typo in a hook name): the
    whole plugin; one of its hooks raises or registers an invalid name or object: what it registers of that kind.
    Every other plugin and name works. Two installed distributions that declare the same entry-point name are both
    loaded, with a :class:`PluginWarning`.
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
            name = ep.name
            if name in seen:
                # Both load, the second under a name of its own: a name both register is unusable (an error naming
                # both when it is used), every other name works.
                name = f"{ep.name} ({source})"
                warnings.warn(
                    f"Two installed distributions declare the sb3_grpo plugin {ep.name!r}: {seen[ep.name]} and "
                    f"{source}. Both are loaded (the second as {name!r}); a name both register is unusable. Uninstall "
                    "one of them.",
                    PluginWarning,
                    stacklevel=3,
                )
            seen.setdefault(ep.name, source)
            if pm.get_plugin(name) is not None or name in _records.load_failures:
                continue
            _records.sources[name] = source
            _records.modules[name] = ep.value.partition(":")[0].strip()
            try:
                plugin = ep.load()
            except Exception as exc:
                _records.load_failures[name] = f"importing its entry point {ep.value!r} raised {exc!r}"
                _records.warn_failed(name, _records.load_failures[name], "Nothing of it is loaded")
                continue
            if pm.is_registered(plugin):
                continue  # the same module, declared twice: its hooks run once
            pm.register(plugin, name=name)
            try:
                pm.check_pending()  # the plugins registered before this one passed: a failure is this one's
            except pluggy.PluginValidationError as exc:
                pm.unregister(name=name)
                _records.load_failures[name] = f"it implements a hook that sb3_grpo does not define ({exc})"
                _records.warn_failed(name, _records.load_failures[name], "Nothing of it is loaded")
                continue
            _warn_if_no_hooks(plugin, name, f"{source}, entry point {ep.value!r}")
        _loaded = True
        for registry in _REGISTRIES:  # run the hooks now: a plugin that fails, or a clash, is reported at load
            registry.entries  # noqa: B018


def list_plugins() -> list[dict[str, Any]]:
    """The active plugins and what each registered, in registration order (built-ins first).

    :return: one dict per plugin: ``name`` (the entry-point name, the module of a built-in, or the name given to
        :func:`register_plugin`), ``source`` (``"built-in"``, ``"<in-process>"`` or ``"distribution version"``),
        ``hooks``: for each hook the plugin implements, the names it registered through it, e.g.
        ``{"register_advantage_estimators": ["group_rank"], "register_reward_functions": [...]}``, ``failed``: what
        failed and why (``{"register_reward_functions": "its register_reward_functions hook raised ..."}``, or
        ``{"load": ...}`` for a plugin that failed to import: it is listed with no hooks), and ``clashes``: per hook,
        each name it registered that another plugin claims too, with the other plugins (such a name is unusable).
        A plugin whose ``hooks`` and ``failed`` are empty implements no hook (a :class:`PluginWarning` said why when
        it was loaded). Names registered with :func:`register_advantage_estimator` and its siblings appear under a
        last entry named ``"<in-process>"``.
    """
    load_plugins()
    registered: dict[str, dict[str, list[str]]] = {}
    failed: dict[str, dict[str, str]] = {}
    clashes: dict[str, dict[str, dict[str, list[str]]]] = {}
    for registry in _REGISTRIES:
        registry.entries  # noqa: B018  (builds the registry: runs the hooks once)
        for plugin_name, names in registry.registered_by.items():
            registered.setdefault(plugin_name, {})[registry.hook_name] = list(names)
        for plugin_name, problem in registry.failed.items():
            failed.setdefault(plugin_name, {})[registry.hook_name] = problem
        for clashing, owners in registry.clashes.items():
            for owner in owners:
                others = [p for p in owners if p != owner]
                clashes.setdefault(owner, {}).setdefault(registry.hook_name, {})[clashing] = others
    out: list[dict[str, Any]] = []

    def add(name: str, hooks: dict[str, list[str]], failures: dict[str, str]) -> None:
        out.append(
            {
                "name": name,
                "source": plugin_source(name),
                "hooks": dict(sorted(hooks.items())),
                "failed": failures,
                "clashes": clashes.get(name, {}),
            }
        )

    for name, plugin in pm.list_name_plugin():
        hooks = {caller.name: registered.get(name, {}).get(caller.name, []) for caller in pm.get_hookcallers(plugin) or []}
        add(name, hooks, failed.get(name, {}))
    for name, problem in _records.load_failures.items():
        add(name, {}, {"load": problem})
    local = {registry.hook_name: names for registry in _REGISTRIES if (names := registry.in_process_names())}
    if local:
        add(IN_PROCESS, local, {})
    return out


def plugin_source(name: str) -> str:
    """Where a plugin comes from: ``"built-in"``, ``"<in-process>"`` or ``"distribution version"``."""
    return _records.source(name)


def _warn_if_no_hooks(plugin: Any, name: str, where: str) -> None:
    """Warn that a just-registered plugin implements no hook, saying why and what to add."""
    if pm.get_hookcallers(plugin):
        return
    hooks = sorted(hook for hook in vars(hookspecs) if hasattr(getattr(hookspecs, hook), "sb3_grpo_spec"))
    reasons = []
    for hook in hooks:
        function = getattr(plugin, hook, None)
        if not callable(function):
            continue
        markers = sorted(attr[: -len("_impl")] for attr in dir(function) if attr.endswith("_impl"))
        if markers:
            reasons.append(
                f"its {hook} is marked with the hookimpl of another project ({', '.join(map(repr, markers))}), not sb3_grpo's"
            )
        else:
            reasons.append(f"its {hook} is not decorated with @sb3_grpo.hookimpl")
    if not reasons:
        reason = f"{getattr(plugin, '__name__', type(plugin).__name__)!r} holds none of the hook functions"
        if isinstance(plugin, types.ModuleType) and hasattr(plugin, "__path__"):
            with contextlib.suppress(Exception):
                if importlib.util.find_spec(f"{plugin.__name__}.hooks") is not None:
                    reason += (
                        f" (they may be in {plugin.__name__}.hooks: the entry point must name the module that holds "
                        f'them, e.g. {name} = "{plugin.__name__}.hooks")'
                    )
        reasons.append(reason)
    warnings.warn(
        f"The sb3_grpo plugin {name!r} ({where}) implements no hook, so it registers nothing: {'; '.join(reasons)}. "
        f"A hook is a function named exactly like one of {', '.join(hooks)}, decorated with @hookimpl "
        "(from sb3_grpo import hookimpl), in the module the entry point names.",
        PluginWarning,
        stacklevel=4,
    )


def register_plugin(plugin: Any, name: str | None = None) -> str:
    """Register a plugin object (a module or instance holding ``@hookimpl`` functions) in this process.

    Its hooks run at once: a plugin whose hook raises, or that registers an invalid name or object, is refused here
    (and left unregistered), with an error naming it and the problem. A name it registers that another plugin
    registers too is unusable from then on (an error naming both when it is used); a :class:`PluginWarning` says so
    at once, and every other name stays usable.

    :return: the name it was registered under (use it with :func:`unregister_plugin`).
    :raises PluginError: for a plugin already registered, a hook that sb3_grpo does not define, a hook that raises
        or an invalid registration.
    """
    load_plugins()
    with _lock:
        try:
            registered = pm.register(plugin, name=name)
        except ValueError as exc:
            raise PluginError(f"Cannot register plugin {name or plugin!r}: {exc}") from exc
        assert registered is not None  # pluggy returns None only for a name blocked with pm.set_blocked
        try:
            pm.check_pending()
        except pluggy.PluginValidationError as exc:
            pm.unregister(name=registered)
            raise PluginError(f"Plugin {registered!r} implements a hook that sb3_grpo does not define: {exc}") from exc
        try:
            for registry in _REGISTRIES:
                registry.probe(registered)
        except PluginError as exc:
            pm.unregister(name=registered)
            _invalidate()
            raise PluginError(f"Cannot register plugin {registered!r}: {exc} It was not registered.") from exc
        _warn_if_no_hooks(plugin, registered, "registered in-process")
        _invalidate()
        for registry in _REGISTRIES:  # build now, so that a name this plugin clashes on is warned about at once
            with contextlib.suppress(PluginError):  # a built-in's fault: raised where its registry is used
                registry.entries  # noqa: B018
        return registered


def unregister_plugin(name: str) -> None:
    """Remove a plugin registered with :func:`register_plugin`.

    :raises KeyError: if no plugin of that name is registered.
    """
    with _lock:
        if pm.get_plugin(name) is None:
            in_process = [n for n, _ in pm.list_name_plugin() if plugin_source(n) == IN_PROCESS]
            raise KeyError(
                f"No sb3_grpo plugin named {name!r} is registered. Registered in-process: "
                f"{', '.join(map(repr, in_process)) or '(none)'}."
            )
        pm.unregister(name=name)
        _invalidate()


def _invalidate() -> None:
    for registry in _REGISTRIES:
        registry.invalidate()


# -------------------------------------------------------------------------
# The registries (sb3_grpo.plugin_registry), one per kind, fed by this plugin manager
# -------------------------------------------------------------------------


_HOST = PluginHost(pm=pm, load=load_plugins, records=_records)
_estimators = FactoryRegistry(ESTIMATOR, "register_advantage_estimators", _HOST)
_reward_functions = Registry("reward function", "register_reward_functions", check_reward_function, _HOST)
_snapshots = Registry("state snapshotter", "register_state_snapshots", check_snapshotter, _HOST)
_policy_losses = FactoryRegistry(POLICY_LOSS, "register_policy_losses", _HOST)
_REGISTRIES = (_estimators, _reward_functions, _snapshots, _policy_losses)


# -------------------------------------------------------------------------
# Public API: each kind's verbs, on its registry
# -------------------------------------------------------------------------


def available_advantage_estimators() -> list[str]:
    """Names of every registered advantage estimator (built-in, installed plugins, in-process)."""
    return _estimators.names()


def get_advantage_estimator(name_or_obj: Any, **kwargs: Any) -> Any:
    """Resolve an advantage estimator and instantiate it.

    :param name_or_obj: a registered name (``"gae"``, ``"group_zscore"``, ...), an estimator class, or an
        estimator instance (returned as is).
    :param kwargs: the estimator's options (``advantage_kwargs``); not allowed with an instance.
    :return: an estimator instance with ``requires`` and ``compute(inputs)``.
    :raises KeyError: for an unknown name, listing the names that exist.
    :raises TypeError: for options the estimator does not accept, or an object that is not an estimator.
    """
    return _estimators.get(name_or_obj, kwargs)


def register_advantage_estimator(name: str, estimator: Any, replace: bool = False) -> None:
    """Register an estimator class (or instance) under ``name`` in this process (tests, notebooks).

    :param replace: shadow an estimator of the same name from a plugin.
    """
    _estimators.register_local(name, estimator, replace)


def unregister_advantage_estimator(name: str) -> None:
    """Remove an estimator registered with :func:`register_advantage_estimator`."""
    _estimators.unregister_local(name)


def registered_advantage_estimators() -> dict[str, Any]:
    """Every registered advantage estimator: name -> the registered class, factory or instance."""
    return _estimators.registered()


def available_reward_functions() -> list[str]:
    """Names of every registered reward function (built-in, installed plugins, in-process)."""
    return _reward_functions.names()


def get_reward_function(name_or_obj: Any) -> Callable:
    """Resolve a reward function by name, or check and return a callable.

    :raises KeyError: for an unknown name, listing the names that exist.
    :raises RewardFunctionError: for a callable with the wrong signature.
    """
    if isinstance(name_or_obj, str):
        return _reward_functions.lookup(name_or_obj).obj
    check_reward_function_signature(name_or_obj)
    return name_or_obj


def register_reward_function(name: str, function: Callable, replace: bool = False) -> None:
    """Register a reward function under ``name`` in this process (tests, notebooks)."""
    _reward_functions.register_local(name, function, replace)


def unregister_reward_function(name: str) -> None:
    """Remove a reward function registered with :func:`register_reward_function`."""
    _reward_functions.unregister_local(name)


def registered_reward_functions() -> dict[str, Any]:
    """Every registered reward function: name -> the registered callable."""
    return _reward_functions.registered()


def reward_function_plugin(name: str) -> str | None:
    """The plugin that registered the reward function ``name`` (``None``: no plugin registers it)."""
    return _reward_functions.plugin_of(name)


def available_state_snapshots() -> list[str]:
    """Names of every registered state snapshotter (for branching groups)."""
    return _snapshots.names()


def register_state_snapshot(name: str, snapshotter: Any, replace: bool = False) -> None:
    """Register a state snapshotter in this process (see the ``register_state_snapshots`` hook)."""
    _snapshots.register_local(name, snapshotter, replace)


def unregister_state_snapshot(name: str) -> None:
    """Remove a state snapshotter registered with :func:`register_state_snapshot`."""
    _snapshots.unregister_local(name)


def registered_state_snapshotters() -> dict[str, Any]:
    """Every registered state snapshotter, in registration order: name -> the registered class or instance."""
    return _snapshots.registered()


def available_policy_losses() -> list[str]:
    """Names of every registered policy loss (built-in, installed plugins, in-process)."""
    return _policy_losses.names()


def get_policy_loss(name_or_obj: Any, **kwargs: Any) -> Any:
    """Resolve a policy loss and instantiate it.

    :param name_or_obj: a registered name (``"clip"``, ``"gspo"``, ...), a policy loss class (or factory), or an
        instance (returned as is).
    :param kwargs: the loss's options (GRPO's ``policy_loss_kwargs``); not allowed with an instance.
    :return: a policy loss instance with ``compute(inputs)`` and ``by_trajectory``.
    :raises KeyError: for an unknown name, listing the names that exist.
    :raises TypeError: for options the loss does not accept (naming the loss and the options it takes), or an object
        that is not a policy loss.
    """
    return _policy_losses.get(name_or_obj, kwargs)


def register_policy_loss(name: str, loss: Any, replace: bool = False) -> None:
    """Register a policy loss class (or instance) under ``name`` in this process (tests, notebooks).

    :param replace: shadow a loss of the same name from a plugin.
    """
    _policy_losses.register_local(name, loss, replace)


def unregister_policy_loss(name: str) -> None:
    """Remove a policy loss registered with :func:`register_policy_loss`."""
    _policy_losses.unregister_local(name)


def registered_policy_losses() -> dict[str, Any]:
    """Every registered policy loss: name -> the registered class, factory or instance."""
    return _policy_losses.registered()


def policy_loss_plugin(name: str) -> str | None:
    """The plugin that registered the policy loss ``name`` (``None``: no plugin registers it)."""
    return _policy_losses.plugin_of(name)


def skipped_plugins() -> dict[str, tuple[str, str]]:
    """Installed plugins that ``SB3_GRPO_LOAD_PLUGINS`` leaves out: entry-point name -> (module, "distribution version")."""
    load_plugins()
    return dict(_records.skipped)


def _reset_for_tests() -> None:
    """Forget everything loaded (the next lookup loads again). For the test suite only."""
    global _loaded
    with _lock:
        for name, _plugin in list(pm.list_name_plugin()):
            pm.unregister(name=name)
        _records.clear()
        _loaded = False
        for registry in _REGISTRIES:
            registry.forget()
