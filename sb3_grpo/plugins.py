"""
The plugin manager of sb3_grpo, and the registries it feeds.

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
import threading
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pluggy

from sb3_grpo import hookspecs
from sb3_grpo.plugin_checks import (
    ESTIMATOR,
    POLICY_LOSS,
    Interface,
    check_reward_function,
    check_reward_function_signature,
    check_snapshotter,
)

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
LOAD_PLUGINS_ENV = "SB3_GRPO_LOAD_PLUGINS"
DEFAULT_PLUGINS: tuple[str, ...] = (
    "sb3_grpo.default_plugins.advantage_estimators",
    "sb3_grpo.default_plugins.reward_functions",
    "sb3_grpo.default_plugins.state_snapshots",
    "sb3_grpo.default_plugins.policy_losses",
    "sb3_grpo.envs.arithmetic_rewards",
)
IN_PROCESS = "<in-process>"


class PluginError(RuntimeError):
    """A plugin registered in-process raised while registering or registers something invalid, or a name is claimed
    by two plugins (raised when that name is used)."""


class PluginWarning(UserWarning):
    """An installed plugin failed to load (it is left out), registers nothing, or claims a name another plugin claims;
    or ``SB3_GRPO_LOAD_PLUGINS`` names a plugin that is not installed."""


class _HookError(PluginError):
    """A plugin's hook raised or registered something invalid. ``problem`` says what, without naming the plugin."""

    def __init__(self, message: str, problem: str):
        super().__init__(message)
        self.problem = problem


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
#: installed plugins that SB3_GRPO_LOAD_PLUGINS left out: entry-point name -> (module it names, "distribution version")
_skipped_plugins: dict[str, tuple[str, str]] = {}
#: entry-point name -> the module its entry point names (for messages about a plugin that failed)
_plugin_modules: dict[str, str] = {}
#: installed plugins left out because they failed to load (import, or a hook sb3_grpo does not define): name -> problem
_load_failures: dict[str, str] = {}


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
            _skipped_plugins[ep.name] = (ep.value.split(":")[0], _entry_point_source(ep))
    return [ep for ep in entry_points if ep.name in names]


def filter_note() -> str:
    """A sentence for "unknown name" errors when ``SB3_GRPO_LOAD_PLUGINS`` restricts loading ("" when it does not)."""
    wanted = os.environ.get(LOAD_PLUGINS_ENV)
    if wanted is None:
        return ""
    skipped = ", ".join(f"{name!r} ({source})" for name, (_module, source) in sorted(_skipped_plugins.items()))
    return (
        f" {LOAD_PLUGINS_ENV}={wanted!r} is set, so only the plugins it names load"
        + (f"; installed but not loaded: {skipped}" if skipped else "")
        + f". Add the plugin's entry-point name to {LOAD_PLUGINS_ENV} (or unset it to load every installed plugin)."
    )


def _failure_note(failures: dict[str, str]) -> str:
    """A sentence per failed plugin for "unknown name" errors ("" when none failed)."""
    return "".join(
        f" Plugin {_describe_failed(name)} failed to load: {problem}; its names may be among the missing."
        for name, problem in failures.items()
    )


def _describe_failed(plugin_name: str) -> str:
    """``'rank' (sb3_grpo_rank_plugin.hooks, sb3-grpo-rank-plugin 0.1.0)``: a plugin, its module and distribution."""
    source = plugin_source(plugin_name)
    module = _plugin_modules.get(plugin_name)
    if module is None:
        return _describe(plugin_name)
    return f"{plugin_name!r} ({module if source in (module, IN_PROCESS) else f'{module}, {source}'})"


def _warn_failed(plugin_name: str, problem: str, left_out: str) -> None:
    """Warn that a plugin failed: who, what failed, what is left out, and how to fix it."""
    if plugin_source(plugin_name) == IN_PROCESS:
        fix = f"Fix it, or unregister it (sb3_grpo.unregister_plugin({plugin_name!r}))."
    else:
        fix = f"Fix or uninstall it, or leave it out with {LOAD_PLUGINS_ENV}=<the plugins you want>."
    warnings.warn(
        f"The sb3_grpo plugin {_describe_failed(plugin_name)} failed to load: {problem}. {left_out} (every other name "
        f"works). {fix}",
        PluginWarning,
        stacklevel=5,
    )


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
            if pm.get_plugin(name) is not None or name in _load_failures:
                continue
            _plugin_sources[name] = source
            _plugin_modules[name] = ep.value.partition(":")[0].strip()
            try:
                plugin = ep.load()
            except Exception as exc:
                _load_failures[name] = f"importing its entry point {ep.value!r} raised {exc!r}"
                _warn_failed(name, _load_failures[name], "Nothing of it is loaded")
                continue
            if pm.is_registered(plugin):
                continue  # the same module, declared twice: its hooks run once
            pm.register(plugin, name=name)
            try:
                pm.check_pending()  # the plugins registered before this one passed: a failure is this one's
            except pluggy.PluginValidationError as exc:
                pm.unregister(name=name)
                _load_failures[name] = f"it implements a hook that sb3_grpo does not define ({exc})"
                _warn_failed(name, _load_failures[name], "Nothing of it is loaded")
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
    for name, problem in _load_failures.items():
        add(name, {}, {"load": problem})
    local = {registry.hook_name: sorted(registry._local) for registry in _REGISTRIES if registry._local}
    if local:
        add(IN_PROCESS, local, {})
    return out


def plugin_source(name: str) -> str:
    """Where a plugin comes from: ``"built-in"``, ``"<in-process>"`` or ``"distribution version"``."""
    if name in DEFAULT_PLUGINS:
        return "built-in"
    return _plugin_sources.get(name, IN_PROCESS)


def _describe(plugin_name: str) -> str:
    """``'rank' (sb3-grpo-rank-plugin 0.1.0)``: a plugin and where it comes from, for error messages."""
    if plugin_name == IN_PROCESS:
        return "a registration made in-process"
    source = plugin_source(plugin_name)
    return f"{plugin_name!r} ({'registered in-process' if source == IN_PROCESS else source})"


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
    """Names -> objects of one kind, built from one hook plus in-process registrations.

    A name that two plugins register is a clash: it is left out of :attr:`entries` (so no plugin's object is used in
    its place), :meth:`lookup` raises an error naming both plugins, and a :class:`PluginWarning` says so when the
    registry is built; every other name stays usable. A plugin (other than a built-in) whose hook raises or registers
    something invalid when the registry is built contributes nothing to it: a :class:`PluginWarning` names it, and
    :meth:`lookup` mentions it when a name is unknown.
    """

    def __init__(self, kind: str, hook_name: str, validate: Callable[[str, Any, str], None]):
        self.kind = kind
        self.hook_name = hook_name
        self.validate = validate
        self._entries: dict[str, _Entry] | None = None
        self._local: dict[str, _Entry] = {}
        #: plugin name -> the names its hook registered (set when the registry is built; for :func:`list_plugins`)
        self.registered_by: dict[str, list[str]] = {}
        #: name -> the plugins that claim it (two or more), when the registry was built
        self.clashes: dict[str, list[str]] = {}
        #: plugin name -> what went wrong in its hook (it contributes nothing), when the registry was built
        self.failed: dict[str, str] = {}
        self._warned: set[tuple[str, ...]] = set()

    def _collect(self, impl: Any) -> list[_Entry]:
        """Call one plugin's hook and check what it registers (names, objects, a name registered twice).

        :raises _HookError: naming the plugin and the problem (the hook raised, or registered something invalid).
        """
        plugin_name = impl.plugin_name
        collected: dict[str, _Entry] = {}

        def register(name: str, obj: Any) -> None:
            if isinstance(name, str) and name in collected:
                raise _HookError(
                    f"Plugin {plugin_name!r} registers the {self.kind} name {name!r} twice.",
                    f"its {self.hook_name} hook registers the {self.kind} name {name!r} twice",
                )
            collected[name] = self._checked(name, obj, plugin_name)

        try:
            impl.function(*[{"register": register}[arg] for arg in impl.argnames])
        except _HookError:
            raise
        except Exception as exc:
            raise _HookError(
                f"Plugin {plugin_name!r} raised while registering {self.kind}s: {exc!r}",
                f"its {self.hook_name} hook raised {exc!r}",
            ) from exc
        return list(collected.values())

    def probe(self, plugin_name: str) -> list[str]:
        """Run the hook of one plugin alone and check what it registers (names, objects, a name registered twice).

        :return: the names it registers.
        :raises PluginError: naming the plugin and the problem.
        """
        names: list[str] = []
        for impl in getattr(pm.hook, self.hook_name).get_hookimpls():
            if impl.plugin_name == plugin_name:
                names += [entry.name for entry in self._collect(impl)]
        return names

    def _build(self) -> dict[str, _Entry]:
        load_plugins()
        entries: dict[str, _Entry] = {}
        clashes: dict[str, list[str]] = {}
        self.registered_by = {}
        self.failed = {}
        hook = getattr(pm.hook, self.hook_name)
        for impl in hook.get_hookimpls():  # in registration order: built-ins first
            plugin_name = impl.plugin_name
            self.registered_by.setdefault(plugin_name, [])
            try:
                collected = self._collect(impl)
            except _HookError as exc:
                if plugin_source(plugin_name) == "built-in":
                    raise  # a bug in sb3_grpo itself
                self.failed[plugin_name] = exc.problem
                if ("failed", plugin_name, exc.problem) not in self._warned:
                    self._warned.add(("failed", plugin_name, exc.problem))
                    _warn_failed(plugin_name, exc.problem, f"None of its {self.kind}s are registered")
                continue  # all or nothing: none of what this hook registered is used
            for entry in collected:
                self._claim(entries, clashes, entry)
                self.registered_by[plugin_name].append(entry.name)
        for name, entry in self._local.items():
            if entry.shadows:  # replace=True: in this process, this object is the one the name means
                clashes.pop(name, None)
                entries[name] = entry
            else:
                self._claim(entries, clashes, entry)
        self.clashes = clashes
        for name, plugins in clashes.items():
            key = (name, *plugins)
            if key not in self._warned:
                self._warned.add(key)
                warnings.warn(self._clash_message(name, plugins), PluginWarning, stacklevel=4)
        return entries

    @staticmethod
    def _claim(entries: dict[str, _Entry], clashes: dict[str, list[str]], entry: _Entry) -> None:
        """Add ``entry``, or record a clash when another plugin claims its name already."""
        if entry.name in clashes:
            clashes[entry.name].append(entry.plugin)
        elif entry.name in entries:
            clashes[entry.name] = [entries.pop(entry.name).plugin, entry.plugin]
        else:
            entries[entry.name] = entry

    def _clash_message(self, name: str, plugins: list[str]) -> str:
        who = " and ".join(_describe(p) for p in plugins)
        count = "Two" if len(plugins) == 2 else str(len(plugins))
        fixes = []
        if any(plugin_source(p) == IN_PROCESS and p != IN_PROCESS for p in plugins):
            fixes.append("unregister one (sb3_grpo.unregister_plugin(<its name>))")
        if any(plugin_source(p) not in (IN_PROCESS, "built-in") for p in plugins):
            fixes.append(f"uninstall one, or leave one out with {LOAD_PLUGINS_ENV}=<the plugins you want>")
        fixes.append("rename one")
        return (
            f"{count} plugins claim the {self.kind} name {name!r}: {who}. The name is unusable until only one provides "
            f"it (every other name works): {', or '.join(fixes)}."
        )

    def _checked(self, name: str, obj: Any, plugin: str) -> _Entry:
        """An entry for ``obj``, after checking its name and the object (:raises PluginError: naming the plugin)."""
        who = "An in-process registration" if plugin == IN_PROCESS else f"Plugin {plugin!r}"
        if not isinstance(name, str) or not name or name != name.strip():
            problem = f"registered a {self.kind} with an invalid name {name!r}: use a non-empty string"
            raise _HookError(f"{who} {problem}.", f"its {self.hook_name} hook {problem}")
        try:
            self.validate(name, obj, plugin)
        except (TypeError, ValueError) as exc:
            problem = f"registered an invalid {self.kind} {name!r}: {exc}"
            raise _HookError(f"{who} {problem}", f"its {self.hook_name} hook {problem}") from exc
        return _Entry(name, obj, plugin)

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
        if name in self.clashes:
            raise PluginError(self._clash_message(name, self.clashes[name]))
        if name not in entries:
            raise UnknownNameError(
                f"Unknown {self.kind} {name!r}. Available: {', '.join(sorted(entries)) or '(none)'}. "
                f"Install or register a plugin that provides it.{_failure_note({**_load_failures, **self.failed})}"
                f"{filter_note()}"
            )
        return entries[name]

    def register_local(self, name: str, obj: Any, replace: bool) -> None:
        with _lock:
            if name in self._local and not replace:
                raise PluginError(f"A {self.kind} named {name!r} is already registered in-process; pass replace=True.")
            entries = self.entries
            owners = self.clashes.get(name) or ([entries[name].plugin] if name in entries else [])
            owners = [p for p in owners if p != IN_PROCESS]
            if owners and not replace:
                raise PluginError(
                    f"The {self.kind} name {name!r} is already provided by plugin "
                    f"{' and '.join(map(repr, owners))}; choose another name, or pass replace=True to shadow it in "
                    "this process."
                )
            entry = self._checked(name, obj, IN_PROCESS)
            entry.shadows = replace
            self._local[name] = entry
            self._entries = None

    def unregister_local(self, name: str) -> None:
        with _lock:
            if name not in self._local:
                raise KeyError(
                    f"No {self.kind} named {name!r} was registered in-process. Registered in-process: "
                    f"{', '.join(map(repr, sorted(self._local))) or '(none)'}."
                )
            del self._local[name]
            self._entries = None

    def registered(self) -> dict[str, Any]:
        """Every registered name -> its object, in registration order."""
        return {name: entry.obj for name, entry in self.entries.items()}

    def plugin_of(self, name: str) -> str | None:
        """The plugin that registered ``name`` (``None``: no plugin registers it)."""
        entry = self.entries.get(name)
        return None if entry is None else entry.plugin

    def forget(self) -> None:
        """Forget the in-process registrations, the warnings given and what the last build found."""
        self._local.clear()
        self._warned.clear()
        self.clashes = {}
        self.failed = {}
        self._entries = None


class _FactoryRegistry(_Registry):
    """The registry of a kind registered as a class, a factory or an instance (:class:`~sb3_grpo.plugin_checks.Interface`):
    :meth:`get` resolves a name or an object to an instance built with the user's options."""

    def __init__(self, interface: Interface, hook_name: str):
        super().__init__(interface.kind, hook_name, interface.check)
        self.interface = interface

    def get(self, name_or_obj: Any, options: dict[str, Any]) -> Any:
        """An instance for a registered name, a class or factory (built with ``options``), or an instance (returned
        as is). One built for a name remembers the name and the plugin that registered it, for error messages."""
        if not isinstance(name_or_obj, str):
            label = getattr(name_or_obj, "__name__", type(name_or_obj).__name__)
            try:
                self.interface.check(label, name_or_obj, IN_PROCESS)
            except TypeError as exc:
                raise TypeError(f"{self.kind.capitalize()} {label!r} is not usable: {exc}") from None
            return self.interface.build(name_or_obj, label, options)
        entry = self.lookup(name_or_obj)
        built = self.interface.build(entry.obj, name_or_obj, options)
        with contextlib.suppress(AttributeError):  # objects with __slots__ keep no name
            built._registered_name = name_or_obj
            built._registered_plugin = entry.plugin
        return built


def _invalidate() -> None:
    for registry in _REGISTRIES:
        registry._entries = None


_estimators = _FactoryRegistry(ESTIMATOR, "register_advantage_estimators")
_reward_functions = _Registry("reward function", "register_reward_functions", check_reward_function)
_snapshots = _Registry("state snapshotter", "register_state_snapshots", check_snapshotter)
_policy_losses = _FactoryRegistry(POLICY_LOSS, "register_policy_losses")
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
    return dict(_skipped_plugins)


def _reset_for_tests() -> None:
    """Forget everything loaded (the next lookup loads again). For the test suite only."""
    global _loaded
    with _lock:
        for name, _plugin in list(pm.list_name_plugin()):
            pm.unregister(name=name)
        _plugin_sources.clear()
        _skipped_plugins.clear()
        _plugin_modules.clear()
        _load_failures.clear()
        _loaded = False
        for registry in _REGISTRIES:
            registry.forget()
