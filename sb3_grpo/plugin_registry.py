"""
The registries of sb3_grpo's plugins: one per kind of object, each with the same verbs, built from one hook plus the
registrations made in-process; what is known of each plugin for their messages; the errors and warnings they raise.

:mod:`sb3_grpo.plugins` builds the four registries and is where every public name is imported from. A registry
reaches the plugin manager through a :class:`PluginHost` (the ``pm`` whose hooks it calls, ``load_plugins``, and the
:class:`PluginRecords` the loader fills), so this module imports nothing of :mod:`sb3_grpo.plugins`: the layers go
hookspecs, plugin_checks <- plugin_registry <- plugins.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pluggy

from sb3_grpo.plugin_checks import Interface

__all__ = [
    "IN_PROCESS",
    "LOAD_PLUGINS_ENV",
    "Entry",
    "FactoryRegistry",
    "PluginError",
    "PluginHost",
    "PluginRecords",
    "PluginWarning",
    "Registry",
    "UnknownNameError",
    "lock",
]

#: the environment variable that restricts which installed plugins load (named in the registries' messages)
LOAD_PLUGINS_ENV = "SB3_GRPO_LOAD_PLUGINS"
#: the plugin name of what was registered in-process (register_advantage_estimator and its siblings)
IN_PROCESS = "<in-process>"

#: held while plugins load, a registry builds, or a registration changes what a registry holds
lock = threading.RLock()


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


# Users import these from sb3_grpo.plugins (or sb3_grpo): tracebacks, reprs and pickles keep naming that home.
for _error in (PluginError, PluginWarning, UnknownNameError):
    _error.__module__ = "sb3_grpo.plugins"
del _error


class PluginRecords:
    """What is known of each plugin besides its hooks: where it comes from, the module its entry point names, and
    whether ``SB3_GRPO_LOAD_PLUGINS`` left it out or it failed to load; and how messages name it.

    :mod:`sb3_grpo.plugins` fills it while loading; the registries read it for their messages.
    """

    def __init__(self, built_ins: tuple[str, ...]):
        self.built_ins = built_ins
        #: entry-point name -> "distribution version" (for listings and error messages)
        self.sources: dict[str, str] = {}
        #: installed plugins that SB3_GRPO_LOAD_PLUGINS left out: entry-point name -> (module it names, "distribution version")
        self.skipped: dict[str, tuple[str, str]] = {}
        #: entry-point name -> the module its entry point names (for messages about a plugin that failed)
        self.modules: dict[str, str] = {}
        #: installed plugins left out because they failed to load (import, or a hook sb3_grpo does not define): name -> problem
        self.load_failures: dict[str, str] = {}

    def clear(self) -> None:
        self.sources.clear()
        self.skipped.clear()
        self.modules.clear()
        self.load_failures.clear()

    def source(self, name: str) -> str:
        """Where a plugin comes from: ``"built-in"``, ``"<in-process>"`` or ``"distribution version"``."""
        if name in self.built_ins:
            return "built-in"
        return self.sources.get(name, IN_PROCESS)

    def describe(self, plugin_name: str) -> str:
        """``'rank' (sb3-grpo-rank-plugin 0.1.0)``: a plugin and where it comes from, for error messages."""
        if plugin_name == IN_PROCESS:
            return "a registration made in-process"
        source = self.source(plugin_name)
        return f"{plugin_name!r} ({'registered in-process' if source == IN_PROCESS else source})"

    def describe_failed(self, plugin_name: str) -> str:
        """``'rank' (sb3_grpo_rank_plugin.hooks, sb3-grpo-rank-plugin 0.1.0)``: a plugin, its module and distribution."""
        source = self.source(plugin_name)
        module = self.modules.get(plugin_name)
        if module is None:
            return self.describe(plugin_name)
        return f"{plugin_name!r} ({module if source in (module, IN_PROCESS) else f'{module}, {source}'})"

    def warn_failed(self, plugin_name: str, problem: str, left_out: str) -> None:
        """Warn that a plugin failed: who, what failed, what is left out, and how to fix it."""
        if self.source(plugin_name) == IN_PROCESS:
            fix = f"Fix it, or unregister it (sb3_grpo.unregister_plugin({plugin_name!r}))."
        else:
            fix = f"Fix or uninstall it, or leave it out with {LOAD_PLUGINS_ENV}=<the plugins you want>."
        warnings.warn(
            f"The sb3_grpo plugin {self.describe_failed(plugin_name)} failed to load: {problem}. {left_out} (every other "
            f"name works). {fix}",
            PluginWarning,
            stacklevel=5,
        )

    def filter_note(self) -> str:
        """A sentence for "unknown name" errors when ``SB3_GRPO_LOAD_PLUGINS`` restricts loading ("" when it does not)."""
        wanted = os.environ.get(LOAD_PLUGINS_ENV)
        if wanted is None:
            return ""
        skipped = ", ".join(f"{name!r} ({source})" for name, (_module, source) in sorted(self.skipped.items()))
        return (
            f" {LOAD_PLUGINS_ENV}={wanted!r} is set, so only the plugins it names load"
            + (f"; installed but not loaded: {skipped}" if skipped else "")
            + f". Add the plugin's entry-point name to {LOAD_PLUGINS_ENV} (or unset it to load every installed plugin)."
        )

    def failure_note(self, failures: dict[str, str]) -> str:
        """A sentence per failed plugin for "unknown name" errors ("" when none failed)."""
        return "".join(
            f" Plugin {self.describe_failed(name)} failed to load: {problem}; its names may be among the missing."
            for name, problem in failures.items()
        )


@dataclass(frozen=True)
class PluginHost:
    """What a registry asks of the plugin manager; :mod:`sb3_grpo.plugins` gives one to each registry it builds."""

    #: the plugin manager whose hooks the registries call
    pm: pluggy.PluginManager
    #: load the plugins (once; later calls do nothing)
    load: Callable[[], None]
    #: what is known of each plugin, for messages
    records: PluginRecords


@dataclass
class Entry:
    name: str
    obj: Any
    plugin: str
    shadows: bool = False  # an in-process registration made with replace=True


class Registry:
    """Names -> objects of one kind, built from one hook plus in-process registrations.

    A name that two plugins register is a clash: it is left out of :attr:`entries` (so no plugin's object is used in
    its place), :meth:`lookup` raises an error naming both plugins, and a :class:`PluginWarning` says so when the
    registry is built; every other name stays usable. A plugin (other than a built-in) whose hook raises or registers
    something invalid when the registry is built contributes nothing to it: a :class:`PluginWarning` names it, and
    :meth:`lookup` mentions it when a name is unknown.
    """

    def __init__(self, kind: str, hook_name: str, validate: Callable[[str, Any, str], None], host: PluginHost):
        self.kind = kind
        self.hook_name = hook_name
        self.validate = validate
        self.host = host
        self._entries: dict[str, Entry] | None = None
        self._local: dict[str, Entry] = {}
        #: plugin name -> the names its hook registered (set when the registry is built; for :func:`list_plugins`)
        self.registered_by: dict[str, list[str]] = {}
        #: name -> the plugins that claim it (two or more), when the registry was built
        self.clashes: dict[str, list[str]] = {}
        #: plugin name -> what went wrong in its hook (it contributes nothing), when the registry was built
        self.failed: dict[str, str] = {}
        self._warned: set[tuple[str, ...]] = set()

    def _collect(self, impl: Any) -> list[Entry]:
        """Call one plugin's hook and check what it registers (names, objects, a name registered twice).

        :raises _HookError: naming the plugin and the problem (the hook raised, or registered something invalid).
        """
        plugin_name = impl.plugin_name
        collected: dict[str, Entry] = {}

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
        for impl in getattr(self.host.pm.hook, self.hook_name).get_hookimpls():
            if impl.plugin_name == plugin_name:
                names += [entry.name for entry in self._collect(impl)]
        return names

    def _build(self) -> dict[str, Entry]:
        self.host.load()
        entries: dict[str, Entry] = {}
        clashes: dict[str, list[str]] = {}
        self.registered_by = {}
        self.failed = {}
        hook = getattr(self.host.pm.hook, self.hook_name)
        for impl in hook.get_hookimpls():  # in registration order: built-ins first
            plugin_name = impl.plugin_name
            self.registered_by.setdefault(plugin_name, [])
            try:
                collected = self._collect(impl)
            except _HookError as exc:
                if self.host.records.source(plugin_name) == "built-in":
                    raise  # a bug in sb3_grpo itself
                self.failed[plugin_name] = exc.problem
                if ("failed", plugin_name, exc.problem) not in self._warned:
                    self._warned.add(("failed", plugin_name, exc.problem))
                    self.host.records.warn_failed(plugin_name, exc.problem, f"None of its {self.kind}s are registered")
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
    def _claim(entries: dict[str, Entry], clashes: dict[str, list[str]], entry: Entry) -> None:
        """Add ``entry``, or record a clash when another plugin claims its name already."""
        if entry.name in clashes:
            clashes[entry.name].append(entry.plugin)
        elif entry.name in entries:
            clashes[entry.name] = [entries.pop(entry.name).plugin, entry.plugin]
        else:
            entries[entry.name] = entry

    def _clash_message(self, name: str, plugins: list[str]) -> str:
        who = " and ".join(self.host.records.describe(p) for p in plugins)
        count = "Two" if len(plugins) == 2 else str(len(plugins))
        fixes = []
        if any(self.host.records.source(p) == IN_PROCESS and p != IN_PROCESS for p in plugins):
            fixes.append("unregister one (sb3_grpo.unregister_plugin(<its name>))")
        if any(self.host.records.source(p) not in (IN_PROCESS, "built-in") for p in plugins):
            fixes.append(f"uninstall one, or leave one out with {LOAD_PLUGINS_ENV}=<the plugins you want>")
        fixes.append("rename one")
        return (
            f"{count} plugins claim the {self.kind} name {name!r}: {who}. The name is unusable until only one provides "
            f"it (every other name works): {', or '.join(fixes)}."
        )

    def _checked(self, name: str, obj: Any, plugin: str) -> Entry:
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
        return Entry(name, obj, plugin)

    @property
    def entries(self) -> dict[str, Entry]:
        with lock:
            if self._entries is None:
                self._entries = self._build()
            return self._entries

    def names(self) -> list[str]:
        return sorted(self.entries)

    def lookup(self, name: str) -> Entry:
        entries = self.entries
        if name in self.clashes:
            raise PluginError(self._clash_message(name, self.clashes[name]))
        if name not in entries:
            records = self.host.records
            failed = records.failure_note({**records.load_failures, **self.failed})
            raise UnknownNameError(
                f"Unknown {self.kind} {name!r}. Available: {', '.join(sorted(entries)) or '(none)'}. "
                f"Install or register a plugin that provides it.{failed}{records.filter_note()}"
            )
        return entries[name]

    def register_local(self, name: str, obj: Any, replace: bool) -> None:
        with lock:
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
            self.invalidate()

    def unregister_local(self, name: str) -> None:
        with lock:
            if name not in self._local:
                raise KeyError(
                    f"No {self.kind} named {name!r} was registered in-process. Registered in-process: "
                    f"{', '.join(map(repr, sorted(self._local))) or '(none)'}."
                )
            del self._local[name]
            self.invalidate()

    def invalidate(self) -> None:
        """Build again at the next use (a plugin was registered or unregistered)."""
        self._entries = None

    def in_process_names(self) -> list[str]:
        """The names registered in-process (:meth:`register_local`), sorted."""
        return sorted(self._local)

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


class FactoryRegistry(Registry):
    """The registry of a kind registered as a class, a factory or an instance (:class:`~sb3_grpo.plugin_checks.Interface`):
    :meth:`get` resolves a name or an object to an instance built with the user's options."""

    def __init__(self, interface: Interface, hook_name: str, host: PluginHost):
        super().__init__(interface.kind, hook_name, interface.check, host)
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
