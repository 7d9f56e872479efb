"""
What a saved model file says about itself, read from its JSON before anything in it is unpickled.

- ``save()`` records the class that saved the file, and the third-party plugins its advantage estimator, reward
  functions and policy loss come from, under :data:`SAVED_BY_KEY` (plain JSON in the archive's ``data``).
- ``load()`` refuses a file saved by another algorithm, naming the class that saved it and the one to call (for
  files written before the record existed, the class is inferred from the saved settings and the policy class).
- ``load()`` unpickles the saved objects itself, refusing any class from an installed plugin that
  ``SB3_GRPO_LOAD_PLUGINS`` leaves out (unpickling imports the plugin: its code would run despite the opt-out), and
  turns a missing plugin (a module that cannot be imported, a reward function or policy loss name nobody registers)
  into an error that names the plugin and says how to go on.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import pickle
import zipfile
from typing import Any

__all__ = [
    "ALGORITHMS",
    "SAVED_BY_KEY",
    "algorithm_family",
    "check_saved_class",
    "prepare_custom_objects",
    "read_saved_data",
    "saved_algorithm",
    "saved_by_record",
]

#: Key of the record in a saved model's ``data``.
SAVED_BY_KEY = "sb3_grpo_saved_by"
#: The algorithms of sb3_grpo (a subclass saves and loads as the one it derives from).
ALGORITHMS = ("GRPO", "ExactTRPO", "AdaptiveKLPPO", "REINFORCE", "OnlineDPO")
#: Files of another library's algorithm that one of ours can continue (ExactTRPO takes every argument of TRPO).
COMPATIBLE = {("ExactTRPO", "TRPO")}
#: Saved keys found only in files of one of our algorithms (files written before the record existed).
SIGNATURE_KEYS = {
    "GRPO": ("group_size", "reward_functions"),
    "ExactTRPO": ("fisher_solver",),
    "AdaptiveKLPPO": ("kl_coef", "kl_estimator"),
}
#: ``stable_baselines3.<folder>.policies`` / ``sb3_contrib.<folder>.policies`` -> the algorithm
POLICY_FOLDERS = {
    "sac": "SAC",
    "td3": "TD3",
    "ddpg": "DDPG",
    "dqn": "DQN",
    "qrdqn": "QRDQN",
    "tqc": "TQC",
    "ars": "ARS",
    "crossq": "CrossQ",
    "maskable": "MaskablePPO",
    "recurrent": "RecurrentPPO",
}
SB3_ALGORITHMS = ("A2C", "DDPG", "DQN", "PPO", "SAC", "TD3")
#: What a saved attribute holding a plugin's object is, for messages.
DESCRIPTIONS = {"_estimator": "advantage estimator", "reward_functions": "reward functions", "policy_loss": "policy loss"}


def algorithm_family(cls: type) -> str:
    """The sb3_grpo algorithm ``cls`` is or derives from (``GRPO`` for a user's ``class MyGRPO(GRPO)``)."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("sb3_grpo.") and klass.__name__ in ALGORITHMS:
            return klass.__name__
    return cls.__name__


def _third_party(plugin: Any) -> bool:
    from sb3_grpo.plugins import DEFAULT_PLUGINS

    return isinstance(plugin, str) and plugin not in DEFAULT_PLUGINS


def saved_by_record(model: Any) -> dict[str, Any]:
    """The record ``save()`` stores: the class, the sb3_grpo version, and the third-party plugins of the model's
    advantage estimator, reward functions and policy loss (``[{"kind", "name", "plugin", "source"}]``)."""
    from sb3_grpo._version import __version__
    from sb3_grpo.plugins import plugin_source, reward_function_plugin

    plugins = []
    estimator = model.__dict__.get("_estimator")
    plugin = getattr(estimator, "_registered_plugin", None)
    if _third_party(plugin):
        name = getattr(estimator, "_registered_name", None)
        plugins.append({"kind": "advantage estimator", "name": name, "plugin": plugin, "source": plugin_source(str(plugin))})
    for name in model.__dict__.get("reward_functions") or []:
        source = reward_function_plugin(name) if isinstance(name, str) else None
        if source is not None and _third_party(source):
            plugins.append({"kind": "reward function", "name": name, "plugin": source, "source": plugin_source(source)})
    loss = model.__dict__.get("_policy_loss")
    plugin = getattr(loss, "_registered_plugin", None)
    if _third_party(plugin):
        name = getattr(loss, "_registered_name", None)
        plugins.append({"kind": "policy loss", "name": name, "plugin": plugin, "source": plugin_source(str(plugin))})
    return {
        "algorithm": algorithm_family(type(model)),
        "class": f"{type(model).__module__}.{type(model).__qualname__}",
        "sb3_grpo_version": __version__,
        "plugins": plugins,
    }


# -------------------------------------------------------------------------
# Reading a file before SB3 does
# -------------------------------------------------------------------------


def read_saved_data(path: Any) -> dict[str, Any] | None:
    """The archive's ``data`` as raw JSON (serialized objects left serialized), or ``None`` if it cannot be read
    (SB3's own ``load`` then reports why)."""
    from stable_baselines3.common.save_util import open_path

    try:
        if isinstance(path, (str, os.PathLike)):
            with open_path(pathlib.Path(path), "r", verbose=0, suffix="zip") as file:
                return _data_of(file)
        if isinstance(path, io.IOBase) and path.seekable():
            position = path.tell()
            try:
                return _data_of(path)
            finally:
                path.seek(position)
    except Exception:
        return None
    return None


def _data_of(file: Any) -> dict[str, Any] | None:
    with zipfile.ZipFile(file) as archive:
        if "data" not in archive.namelist():
            return None
        data = json.loads(archive.read("data").decode())
    return data if isinstance(data, dict) else None


def saved_algorithm(data: dict[str, Any]) -> tuple[str | None, str, bool]:
    """Which algorithm saved a file: ``(name, where the class lives, recorded)``.

    ``recorded`` is false when the file predates the record and the name was inferred from its saved settings
    and policy class; ``name`` is ``None`` when it cannot be told.
    """
    record = data.get(SAVED_BY_KEY)
    if isinstance(record, dict) and isinstance(record.get("algorithm"), str):
        return record["algorithm"], str(record.get("class", "")), True
    keys = set(data)
    for name, signature in SIGNATURE_KEYS.items():
        if set(signature) <= keys:
            return name, f"sb3_grpo.{name}", False
    policy = data.get("policy_class")
    module = policy.get("__module__") if isinstance(policy, dict) else None
    if isinstance(module, str):
        parts = module.split(".")
        if parts[0] in ("stable_baselines3", "sb3_contrib") and len(parts) >= 3:
            folder = parts[2] if parts[1] == "common" else parts[1]
            if folder in POLICY_FOLDERS:
                name = POLICY_FOLDERS[folder]
                return name, f"{_library(name)}.{name}", False
    if "cg_max_steps" in keys:
        return "TRPO", "sb3_contrib.TRPO", False
    if {"clip_range", "n_epochs"} <= keys:
        return "PPO", "stable_baselines3.PPO", False
    if {"normalize_advantage", "n_steps"} <= keys:
        return "A2C", "stable_baselines3.A2C", False
    return None, "", False


def _library(name: str) -> str:
    return "stable_baselines3" if name in SB3_ALGORITHMS else "sb3_contrib"


def check_saved_class(cls: type, data: dict[str, Any], path: Any) -> None:
    """Refuse a file saved by another algorithm than ``cls``'s, naming the class that saved it and the one to call.

    :raises ValueError: when the file was saved by another algorithm (ExactTRPO may load sb3-contrib TRPO files).
    """
    target = algorithm_family(cls)
    saved, where, recorded = saved_algorithm(data)
    if saved is None or saved == target or (target, saved) in COMPATIBLE:
        return
    if saved in ALGORITHMS:
        by = (
            f"{saved} ({where})"
            if recorded
            else f"{saved} (inferred from its saved settings: an earlier sb3_grpo did not record the class)"
        )
        raise ValueError(
            f"Cannot load {path!s} with {cls.__name__}.load: the file was saved by {by}, and {target} cannot continue "
            f"another algorithm's model. Load it with {saved}.load(path)."
        )
    library = where.rpartition(".")[0] or _library(saved)
    hint = ""
    if target != "GRPO" and saved in ("PPO", "A2C", "TRPO"):
        hint = (
            f" To start {target} from its policy's weights: model = {target}(<the same policy and policy_kwargs>, env), "
            f"then model.policy.load_state_dict({saved}.load(path).policy.state_dict())."
        )
    elif target == "GRPO":
        hint = " GRPO's policy has no critic, so it cannot take over another algorithm's networks."
    raise ValueError(
        f"Cannot load {path!s} with {cls.__name__}.load: the file was saved by {library}'s {saved} (inferred from its "
        f"saved settings), not by {target}. Load it with {library}.{saved}.load(path).{hint}"
    )


# -------------------------------------------------------------------------
# Plugin objects: unpickled here, never from a plugin that is switched off
# -------------------------------------------------------------------------


class _PluginOff(Exception):
    def __init__(self, module: str, name: str, plugin: str, source: str):
        super().__init__(module, name, plugin, source)
        self.module, self.name, self.plugin, self.source = module, name, plugin, source


class _GuardedUnpickler(pickle.Unpickler):
    """An unpickler that refuses (before importing anything) classes and functions of the given packages."""

    def __init__(self, file: Any, blocked: dict[str, tuple[str, str]]):
        super().__init__(file)
        self.blocked = blocked
        self.missing: str | None = None

    def find_class(self, module: str, name: str) -> Any:
        top = module.partition(".")[0]
        if top in self.blocked:
            raise _PluginOff(module, name, *self.blocked[top])
        try:
            return super().find_class(module, name)
        except ModuleNotFoundError:
            self.missing = f"{module}.{name}"  # for messages: what the file refers to, not only the module
            raise


def _blocked_packages() -> dict[str, tuple[str, str]]:
    """Top-level packages of the installed plugins that ``SB3_GRPO_LOAD_PLUGINS`` leaves out -> (plugin, source)."""
    from sb3_grpo import plugins

    plugins.load_plugins()
    loaded = {getattr(p, "__name__", type(p).__module__).partition(".")[0] for _, p in plugins.pm.list_name_plugin()}
    blocked = {}
    for name, (module, source) in plugins.skipped_plugins().items():
        top = module.partition(".")[0]
        if top not in loaded and top != "sb3_grpo":
            blocked[top] = (name, source)
    return blocked


def _recorded_plugins(data: dict[str, Any], kind: str) -> dict[str, tuple[str, str]]:
    """name -> (plugin, source) for the names of ``kind`` the file records as coming from a third-party plugin."""
    record = data.get(SAVED_BY_KEY)
    out: dict[str, tuple[str, str]] = {}
    if isinstance(record, dict):
        for entry in record.get("plugins") or []:
            if isinstance(entry, dict) and entry.get("kind") == kind:
                out[str(entry.get("name"))] = (str(entry.get("plugin")), str(entry.get("source", "")))
    return out


def _estimator_argument(data: dict[str, Any]) -> str:
    """The constructor argument the saved advantage estimator was built from (REINFORCE's ``baseline``)."""
    return "baseline" if "baseline" in data else "advantage_estimator"


def _aliases(data: dict[str, Any]) -> dict[str, str]:
    """Saved attribute -> the constructor argument a user knows it by, for attributes stored under another name:
    the estimator object (``_estimator``), and REINFORCE's ``baseline`` / ``baseline_kwargs``, which the model also
    stores as ``advantage_estimator`` / ``advantage_kwargs``."""
    out = {"_estimator": _estimator_argument(data)}
    if "baseline" in data:
        out.update(advantage_estimator="baseline", advantage_kwargs="baseline_kwargs")
    return out


def _what(key: str, item: Any, data: dict[str, Any]) -> tuple[str, str | None, str]:
    """``(description, plugin, source)`` of a saved attribute, for messages."""
    description = DESCRIPTIONS.get(key, "saved value")
    plugin, source = None, ""
    if key == "_estimator" and isinstance(item, dict):
        name = item.get("_registered_name")
        plugin = item.get("_registered_plugin") if _third_party(item.get("_registered_plugin")) else None
        if isinstance(name, str):
            description = f"advantage estimator {name!r}"
            plugin, source = _recorded_plugins(data, "advantage estimator").get(name, (plugin, source))  # type: ignore[arg-type]
    return description, plugin, source


def _plugin_words(plugin: str | None, source: str) -> str:
    if plugin is None:
        return ""
    return f" from the sb3_grpo plugin {plugin!r}" + (f" ({source})" if source and not source.startswith("<") else "")


#: The saved arguments that name plugin objects (rather than pickle them), for the advice of load errors.
_BY_NAME = {"reward_functions": "reward functions", "policy_loss": "policy loss"}


def _replacement_value(key: str) -> str:
    if key in ("advantage_estimator", "baseline"):
        return "'<a registered estimator>'"
    if key == "reward_functions":
        return "['<a registered reward function>', ...]"
    if key == "policy_loss":
        return "'<a registered policy loss>'"
    if key.endswith("_kwargs"):
        return "{...}"
    return "<a replacement>"


def prepare_custom_objects(
    cls: type, data: dict[str, Any], path: Any, custom_objects: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Unpickle the file's serialized objects with the guard, check its reward function names, and return the
    ``custom_objects`` to hand to SB3's ``load`` (the objects unpickled here, so SB3 does not unpickle them again).

    A replacement given for a constructor argument stands for every copy the model keeps of it: REINFORCE's
    ``baseline`` for ``advantage_estimator`` too, and the estimator argument for the estimator object built from it
    (rebuilt from the replacement when the saved one cannot be unpickled).

    :raises sb3_grpo.PluginError: naming, in one message, every object and name the file needs that cannot be loaded
        here (a plugin switched off or not installed, a module missing), by the constructor arguments they belong to,
        and saying how to go on.
    """
    from sb3_grpo.plugins import (
        LOAD_PLUGINS_ENV,
        PluginError,
        available_policy_losses,
        available_reward_functions,
        filter_note,
    )

    given = dict(custom_objects or {})
    out = dict(given)
    if "_reward_combiner" in data and "_reward_combiner" not in given:
        out["_reward_combiner"] = None  # GRPO rebuilds it from reward_functions in _setup_model: no need to unpickle it
    aliases = _aliases(data)
    for key, public in aliases.items():
        if key != "_estimator" and public in given and key not in given and key in data:
            out[key] = given[public]  # the same object, stored twice
    blocked = _blocked_packages()
    problems: dict[str, list[str]] = {}  # constructor argument -> what of it cannot be loaded
    modules: list[str] = []  # modules that are not installed
    switched_off: list[str] = []  # plugins SB3_GRPO_LOAD_PLUGINS leaves out
    for key, item in data.items():
        if key in out or not isinstance(item, dict) or ":serialized:" not in item:
            continue
        public = aliases.get(key, key)
        unpickler = _GuardedUnpickler(io.BytesIO(base64.b64decode(item[":serialized:"].encode())), blocked)
        try:
            out[key] = unpickler.load()
            continue
        except _PluginOff as off:
            if key == "_estimator" and public in given:
                out[key] = None  # rebuilt from the replacement
                continue
            description, _plugin, _source = _what(key, item, data)
            problem = (
                f"its {description} is {off.module}.{off.name}, from the sb3_grpo plugin {off.plugin!r} ({off.source}), "
                f"which {LOAD_PLUGINS_ENV}={os.environ.get(LOAD_PLUGINS_ENV)!r} leaves out (it was not unpickled: that "
                "would import the plugin and run its code)"
            )
            if off.plugin not in switched_off:
                switched_off.append(off.plugin)
        except ModuleNotFoundError as exc:
            if key == "_estimator" and public in given:
                out[key] = None
                continue
            description, plugin, source = _what(key, item, data)
            kind = unpickler.missing or str(item.get(":type:", ""))
            problem = (
                f"its {description} ({kind}){_plugin_words(plugin, source)} needs the module {exc.name!r}, which is "
                "not installed"
            )
            if exc.name and exc.name not in modules:
                modules.append(exc.name)
        except Exception:
            continue  # SB3 unpickles it again and reports (or warns) as usual
        if key == "_estimator" and not (isinstance(item, dict) and item.get("_registered_name")):
            problem = problem.replace("its advantage estimator", f"the advantage estimator built from {public}", 1)
        if key == public or public not in problems:
            problems[public] = [problem]  # one line per argument: its own object rather than a copy built from it
    names = out.get("reward_functions", data.get("reward_functions"))
    reward_note = ""
    if isinstance(names, list) and any(isinstance(n, str) for n in names):
        available = set(available_reward_functions())
        missing = [n for n in names if isinstance(n, str) and n not in available]
        if missing:
            recorded = _recorded_plugins(data, "reward function")
            which = "; ".join(f"{n!r}{_plugin_words(*recorded.get(n, (None, '')))}" for n in missing)
            problems.setdefault("reward_functions", []).append(
                f"it scores trajectories with the reward function{'s' if len(missing) > 1 else ''} {which}, which no "
                f"loaded plugin provides (available: {', '.join(sorted(available))}; replacements score trajectories "
                "when training, one per saved function)"
            )
            reward_note = filter_note()
    loss = out.get("policy_loss", data.get("policy_loss"))
    if isinstance(loss, str) and loss not in (available := set(available_policy_losses())):
        recorded = _recorded_plugins(data, "policy loss")
        problems.setdefault("policy_loss", []).append(
            f"it trains with the policy loss {loss!r}{_plugin_words(*recorded.get(loss, (None, '')))}, which no loaded "
            f"plugin provides (available: {', '.join(sorted(available))})"
        )
        reward_note = filter_note()
    if problems:
        lines = "".join(f"\n  - {key}: {'; '.join(texts)}" for key, texts in problems.items())
        todo = []
        if modules:
            todo.append(
                f"install the plugin (or package) that provides {', '.join(map(repr, modules))}"
                if len(modules) > 1
                else f"install the plugin (or package) that provides {modules[0]!r}"
            )
        if switched_off:
            todo.append(f"add {', '.join(map(repr, switched_off))} to {LOAD_PLUGINS_ENV} (or unset it)")
        named = [what for key, what in _BY_NAME.items() if key in problems]
        if named and not (modules or switched_off):
            todo.append(f"install or enable the plugin that provides the {' and the '.join(named)}")
        replacements = ", ".join(f"{key!r}: {_replacement_value(key)}" for key in problems)
        todo.append(f"pass replacements for all of them: {cls.__name__}.load(path, custom_objects={{{replacements}}})")
        raise PluginError(
            f"Cannot load {path!s} as a {cls.__name__} model: "
            f"{'this saved argument' if len(problems) == 1 else f'these {len(problems)} saved arguments'} cannot be "
            f"loaded here:{lines}\n{reward_note.strip()}"
            f"{' ' if reward_note else ''}To load it, {', or '.join(todo)}."
        )
    return out or custom_objects
