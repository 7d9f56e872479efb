"""
Registration of sb3_grpo's algorithms with rl_zoo3 (which has no plugin API).

rl_zoo3 2.9.2 looks algorithms up in one shared dict, ``rl_zoo3.utils.ALGOS`` (re-exported as ``rl_zoo3.ALGOS`` and
imported by ``train``, ``enjoy`` and ``exp_manager``), and Optuna search spaces in
``rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER`` / ``HYPERPARAMS_CONVERTER`` (imported by ``exp_manager``). Those
are module-level objects, so adding keys to them before ``train()`` / ``enjoy()`` run (their ``--algo`` choices are
built when they are called) is all it takes: :func:`register` does that, once.

It also makes two small, backward-compatible fixes to rl_zoo3's ``ExperimentManager`` that our algorithms need:

- ``_preprocess_schedules`` accepts ``None`` for ``clip_range`` / ``clip_range_vf`` / ``clip_range_high``
  (AdaptiveKLPPO's unclipped variant; rl_zoo3 raises on it) and turns ``lin_<x>`` strings for GRPO's
  ``clip_range_high`` into schedules, as it does for ``clip_range``;
- ``read_hyperparameters`` honours ``--trial-id 0`` (rl_zoo3 tests ``if self.trial_id:`` and silently ignores
  trial 0);
- ``_preprocess_schedules`` reads a ``learning_rate: "KLAdaptiveLR(3e-4, desired_kl=0.01)"`` string as
  :class:`sb3_grpo.KLAdaptiveLR` (rl_zoo3 knows only ``lin_<x>``);
- ``-params key:word`` reads a bare word (other than ``None``, ``True``, ``False``) as that string (rl_zoo3 evaluated
  it: ``advantage_estimator:group_zscore`` raised a NameError, ``pairs:all`` gave Python's ``all``; a word may end in
  ``+``, as ``kl_estimator:k3+``), and a value that is no Python names the parameter and how to quote it;
- ``_preprocess_hyperparams`` reads an ``advantage_kwargs`` or ``policy_loss_kwargs`` string (``"dict(scale='batch')"``)
  as Python, the way rl_zoo3 reads ``policy_kwargs`` strings (a YAML mapping works as is).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

__all__ = ["ALGO_PATHS", "UNAVAILABLE", "available_algos", "default_config_path", "register"]

#: rl-zoo key -> ``"module:Class"`` of our algorithms. Imported lazily: the zoo works with whichever exist.
ALGO_PATHS: dict[str, str] = {
    "grpo": "sb3_grpo.grpo:GRPO",
    "exact_trpo": "sb3_grpo.exact_trpo:ExactTRPO",
    "adaptive_kl_ppo": "sb3_grpo.adaptive_kl_ppo:AdaptiveKLPPO",
    "reinforce": "sb3_grpo.reinforce:REINFORCE",
    "online_dpo": "sb3_grpo.online_dpo:OnlineDPO",
}

#: rl-zoo key -> why the algorithm could not be imported (filled by :func:`register`).
UNAVAILABLE: dict[str, str] = {}

#: Environment variable naming a directory with ``{algo}.yml`` files that takes precedence over the shipped ones.
CONFIG_DIR_ENV = "SB3_GRPO_ZOO_CONFIGS"

_registered: dict[str, type] | None = None


def _import_algo(path: str) -> type:
    module_name, _, class_name = path.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def available_algos() -> dict[str, type]:
    """Our algorithms that import, by rl-zoo key (registers them with rl_zoo3 on first call)."""
    return dict(register())


def register() -> dict[str, type]:
    """Add our algorithms, samplers and converters to rl_zoo3's tables (idempotent); returns the registered classes.

    An algorithm whose import fails (e.g. not written yet, or a missing optional dependency) is left out and its
    error kept in :data:`UNAVAILABLE`.
    """
    global _registered
    if _registered is not None:
        return _registered

    import rl_zoo3.hyperparams_opt as zoo_opt
    import rl_zoo3.utils as zoo_utils

    import sb3_grpo  # noqa: F401  (registers the sb3_grpo/ gymnasium envs)
    from sb3_grpo.zoo.hyperparams_opt import HYPERPARAMS_CONVERTER, HYPERPARAMS_SAMPLER

    registered: dict[str, type] = {}
    for key, path in ALGO_PATHS.items():
        try:
            cls = _import_algo(path)
        except (ImportError, AttributeError) as exc:
            UNAVAILABLE[key] = f"{type(exc).__name__}: {exc}"
            continue
        zoo_utils.ALGOS[key] = cls  # the same dict object as rl_zoo3.ALGOS and the one train/enjoy imported
        zoo_opt.HYPERPARAMS_SAMPLER[key] = HYPERPARAMS_SAMPLER[key]
        zoo_opt.HYPERPARAMS_CONVERTER[key] = HYPERPARAMS_CONVERTER[key]
        registered[key] = cls
    _patch_experiment_manager()
    _patch_store_dict()
    _registered = registered
    return registered


def default_config_path(algo: str) -> Path | None:
    """The default hyperparameter file of one of our algorithms, or ``None`` for other algorithms.

    Looked up in order: ``$SB3_GRPO_ZOO_CONFIGS/{algo}.yml``; ``zoo_configs/{algo}.yml`` of the source checkout this
    package is imported from (the canonical, editable copy); ``sb3_grpo/zoo/configs/{algo}.yml`` inside the
    installed package (where a wheel ships ``zoo_configs/``).
    """
    if algo not in ALGO_PATHS:
        return None
    candidates = []
    env_dir = os.environ.get(CONFIG_DIR_ENV)
    if env_dir:
        candidates.append(Path(env_dir) / f"{algo}.yml")
    package_dir = Path(__file__).resolve().parent  # sb3_grpo/zoo
    checkout = package_dir.parent.parent
    if (checkout / "pyproject.toml").is_file():
        candidates.append(checkout / "zoo_configs" / f"{algo}.yml")
    candidates.append(package_dir / "configs" / f"{algo}.yml")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


def read_kwargs_string(key: str, text: str) -> dict[str, Any]:
    """A ``*_kwargs`` value written as a Python string in a zoo YAML file (``"dict(scale='batch')"`` or
    ``"{'scale': 'batch'}"``), evaluated as rl_zoo3 evaluates ``policy_kwargs`` strings.

    :raises ValueError: naming the key when the string is not Python that gives a dict.
    """
    try:
        value = eval(text, {"dict": dict})  # the same trust as rl_zoo3's eval of policy_kwargs
    except Exception as exc:
        raise ValueError(
            f"{key}: cannot read {text!r} as a Python dict ({type(exc).__name__}: {exc}). Write it as a YAML mapping "
            f"({key}: {{scale: batch}}) or as a Python string ({key}: \"dict(scale='batch')\"); names inside the string "
            "need quotes."
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"{key}: {text!r} gives a {type(value).__name__}, not a dict: write \"dict(scale='batch')\".")
    return value


def read_kl_adaptive_lr(text: str) -> Any:
    """A ``learning_rate: "KLAdaptiveLR(3e-4, desired_kl=0.01)"`` string of a zoo YAML file (or of ``-params``) as the
    schedule :class:`sb3_grpo.KLAdaptiveLR` it names.

    :raises ValueError: naming the string when it is not such a call.
    """
    from sb3_grpo.common.schedules import KLAdaptiveLR

    try:
        value = eval(text, {"__builtins__": {}}, {"KLAdaptiveLR": KLAdaptiveLR})  # the trust of rl_zoo3's eval
    except Exception as exc:
        raise ValueError(
            f"learning_rate: cannot read {text!r} as a KLAdaptiveLR ({type(exc).__name__}: {exc}). Write it as "
            '"KLAdaptiveLR(3e-4, desired_kl=0.01)" (numbers only; see help(sb3_grpo.KLAdaptiveLR)).'
        ) from None
    if not isinstance(value, KLAdaptiveLR):
        raise ValueError(f"learning_rate: {text!r} gives a {type(value).__name__}, not a KLAdaptiveLR")
    return value


def _patch_store_dict() -> None:
    """``-params key:value`` evaluates ``value`` as Python (rl_zoo3's ``StoreDict``): a word written without quotes,
    such as ``advantage_estimator:group_zscore``, raised a bare NameError, and ``pairs:all`` gave Python's ``all``. A
    bare word other than ``None``, ``True`` and ``False`` is now the string it spells; anything else that does not
    evaluate is an error naming the parameter and saying how to quote it."""
    import re

    from rl_zoo3.utils import StoreDict

    if getattr(StoreDict, "_sb3_grpo_patched", False):
        return
    word = re.compile(r"[A-Za-z_][\w\-/]*\+?")  # no dots: nn.ReLU is Python; a trailing + for kl_estimator:k3+
    zoo_globals = vars(sys.modules[StoreDict.__module__])  # rl_zoo3's: nn, th, np, ... as its own eval sees them

    def __call__(self: Any, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        arg_dict = {}
        for arguments in values:
            key, _, value = arguments.partition(":")
            if word.fullmatch(value) and value not in ("None", "True", "False"):
                arg_dict[key] = value  # a bare word: its text (any, all, ... would otherwise be Python's builtins)
                continue
            try:
                arg_dict[key] = eval(value, zoo_globals)  # rl_zoo3's reading: numbers, lists, dicts, strings, None
            except (NameError, SyntaxError) as exc:
                parser.error(
                    f"{option_string} {arguments}: cannot read {value!r} as a Python value ({exc}). Quote strings "
                    f'and write lists and dicts as Python: {key}:"\'text\'", {key}:"[1, 2]", {key}:"dict(a=1)".'
                )
        setattr(namespace, self.dest, arg_dict)

    StoreDict.__call__ = __call__  # type: ignore[method-assign]
    StoreDict._sb3_grpo_patched = True  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------ ExperimentManager fixes
_SCHEDULE_NONE_KEYS = ("clip_range", "clip_range_vf", "clip_range_high")
#: The options of plugin objects that a zoo file may write as a Python string (``"dict(scale='batch')"``).
_KWARGS_KEYS = ("advantage_kwargs", "policy_loss_kwargs")


def _patch_experiment_manager() -> None:
    from rl_zoo3.exp_manager import ExperimentManager
    from rl_zoo3.utils import SimpleLinearSchedule

    if getattr(ExperimentManager, "_sb3_grpo_patched", False):
        return
    original_schedules = ExperimentManager._preprocess_schedules
    original_read = ExperimentManager.read_hyperparameters
    original_preprocess = ExperimentManager._preprocess_hyperparams

    def _preprocess_hyperparams(self: Any, hyperparams: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        for key in _KWARGS_KEYS:
            if isinstance(hyperparams.get(key), str):
                hyperparams[key] = read_kwargs_string(key, hyperparams[key])
        return original_preprocess(self, hyperparams, *args, **kwargs)

    def _preprocess_schedules(hyperparams: dict[str, Any]) -> dict[str, Any]:
        held: dict[str, Any] = {key: None for key in _SCHEDULE_NONE_KEYS if key in hyperparams and hyperparams[key] is None}
        rate = hyperparams.get("learning_rate")
        if isinstance(rate, str) and rate.startswith("KLAdaptiveLR"):
            held["learning_rate"] = read_kl_adaptive_lr(rate)
        elif type(rate).__name__ == "KLAdaptiveLR":  # already read (rl_zoo3 refuses objects it does not know)
            held["learning_rate"] = rate
        for key in held:
            del hyperparams[key]
        hyperparams = original_schedules(hyperparams)
        high = hyperparams.get("clip_range_high")
        if isinstance(high, str):
            _schedule, initial_value = high.split("_")
            hyperparams["clip_range_high"] = SimpleLinearSchedule(float(initial_value))
        hyperparams.update(held)
        return hyperparams

    def read_hyperparameters(self: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        if not (self.trial_id == 0 and self.storage and self.study_name):
            return original_read(self)
        # rl_zoo3 skips the study when trial_id is 0 (falsy): read the file, then apply trial 0 below the
        # command-line overrides, exactly as rl_zoo3 does for other trial ids.
        self.trial_id = None
        try:
            hyperparams, _ = original_read(self)
        finally:
            self.trial_id = 0
        print("Loading trial 0 from Optuna study...")
        hyperparams.update(self.load_trial(self.storage, self.study_name, 0))
        if self.custom_hyperparams is not None:
            hyperparams.update(self.custom_hyperparams)
        saved_hyperparams = OrderedDict([(key, hyperparams[key]) for key in sorted(hyperparams.keys())])
        return hyperparams, saved_hyperparams

    ExperimentManager._preprocess_schedules = staticmethod(_preprocess_schedules)  # type: ignore[method-assign]
    ExperimentManager.read_hyperparameters = read_hyperparameters  # type: ignore[method-assign]
    ExperimentManager._preprocess_hyperparams = _preprocess_hyperparams  # type: ignore[method-assign]
    ExperimentManager._sb3_grpo_patched = True  # type: ignore[attr-defined]
