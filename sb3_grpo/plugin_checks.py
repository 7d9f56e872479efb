"""
What the objects that plugins register must be: the checks the registries (:mod:`sb3_grpo.plugin_registry`) run.

The bottom layer with :mod:`sb3_grpo.hookspecs` (it imports nothing else of sb3_grpo): the registries check
what a hook registers with these functions, and the interfaces in :mod:`sb3_grpo.common` (advantage estimators,
reward functions, state snapshotters, policy losses) build on the same definitions.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ESTIMATOR",
    "ESTIMATOR_CONTRACT",
    "NEEDS",
    "POLICY_LOSS",
    "POLICY_LOSS_CONTRACT",
    "Interface",
    "RewardFunctionError",
    "check_by_trajectory",
    "check_estimator",
    "check_policy_loss",
    "check_requires",
    "check_reward_function",
    "check_reward_function_signature",
    "check_snapshotter",
    "function_name",
    "is_estimator_instance",
    "is_number",
    "is_policy_loss_instance",
]

#: What an estimator may need, with the words used in error messages.
NEEDS: dict[str, str] = {
    "values": "a critic's value estimates",
    "group_ids": "group ids (trajectories sampled in groups that share a start state)",
    "outcome_rewards": "one outcome reward per trajectory",
    "step_rewards": "per-step rewards",
    "score_norms": (
        "each step's squared score norm with respect to the logits of a categorical policy (a Discrete action space)"
    ),
    "observations": "each step's observation as the policy saw it, flattened to numbers",
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
        hint = ""
        if isinstance(fn, type) and any("__call__" in vars(klass) for klass in fn.__mro__[:-1]):
            hint = f" {fn.__name__} is a class: register an instance ({fn.__name__}()), whose __call__(trajectory) scores."
        raise RewardFunctionError(
            f"Reward function {label!r} must accept exactly one argument, the Trajectory; its signature is "
            f"{label}{signature}.{hint}"
        ) from None


@dataclass(frozen=True)
class Interface:
    """A kind registered as a class, a factory or an instance, whose instances have a method ``compute(inputs)``
    (advantage estimators, policy losses): what such an object must be, and the words of the messages about it.

    :func:`check_estimator` and :func:`check_policy_loss` are the :meth:`check` of :data:`ESTIMATOR` and
    :data:`POLICY_LOSS`; the registries build instances with :meth:`build`.
    """

    #: the kind in messages ("advantage estimator")
    kind: str
    #: what an object that is not one is said not to be ("estimator")
    noun: str
    #: the class to subclass ("AdvantageEstimator")
    base: str
    #: the argument of compute ("AdvantageInputs")
    inputs: str
    #: what compute computes ("advantages")
    computes: str
    #: the constructor argument that holds the options ("advantage_kwargs")
    options: str
    #: the whole definition, for messages
    contract: str
    #: what a built object that is not an instance lacks ("has no requires/compute")
    lacks: str
    is_instance: Callable[[Any], bool]
    #: checks the kind's own attributes on a class or an instance: ``check_attributes(label, obj)``
    check_attributes: Callable[[str, Any], None]

    def check(self, name: str, obj: Any, plugin: str) -> None:
        """``obj`` is a class (or factory) whose instances have ``compute(inputs)`` and the kind's attributes, or such
        an instance. A factory (a function) is called once without arguments, and what it returns is checked.

        :raises TypeError: saying what is wrong and what the kind must be.
        """
        if not (isinstance(obj, type) or self.is_instance(obj)):
            if not callable(obj):
                raise TypeError(
                    f"expected {_a(self.base)} subclass or instance, got {obj!r} (a {type(obj).__name__}): {self.contract}"
                )
            self._check_factory(name, obj, plugin)
            return
        label = obj.__name__ if isinstance(obj, type) else type(obj).__name__
        if not callable(getattr(obj, "compute", None)):
            raise TypeError(f"{label} has no compute(inputs) method: {self.contract}")
        if isinstance(obj, type) and inspect.isabstract(obj):
            raise TypeError(f"{label} is abstract (missing {sorted(obj.__abstractmethods__)})")  # type: ignore[attr-defined]  # set by ABCMeta
        self._check_compute_signature(obj)
        self.check_attributes(label, obj)

    def _check_factory(self, name: str, factory: Any, plugin: str) -> None:
        """A factory must build an instance from options that all have defaults: call it once and check the result."""
        label = getattr(factory, "__name__", type(factory).__name__)
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):
            return  # no signature to read (a builtin): checked when it is called
        parameters = signature.parameters.values()
        required = [p for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if required:
            raise TypeError(
                f"{label}{signature} is a function with required arguments, not {_a(self.noun)}: {self.contract}. A "
                f"function that computes {self.computes} from the inputs belongs in the compute method of "
                f"{_a(self.base)} subclass; register the class."
            )
        try:
            produced = factory()
        except Exception as exc:
            raise TypeError(f"the factory {label}{signature} raised when called without arguments: {exc!r}") from exc
        if not self.is_instance(produced):
            raise TypeError(
                f"{label} is a function that returns {produced!r} (a {type(produced).__name__}), not {_a(self.noun)}: "
                f"{self.contract}."
            )
        self.check(name, produced, plugin)

    def _check_compute_signature(self, obj: Any) -> None:
        """``compute`` must take exactly one argument (besides ``self`` on a class)."""
        try:
            signature = inspect.signature(obj.compute)
        except (TypeError, ValueError):
            return  # no signature to read: checked when it is called
        params = list(signature.parameters.values())
        if isinstance(obj, type) and params and params[0].name == "self":
            params = params[1:]
        required = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not (len(required) == 1 or (not required and any(p.kind == p.VAR_POSITIONAL for p in params))):
            raise TypeError(f"compute must take exactly one argument (the {self.inputs}); its signature is compute{signature}")

    def build(self, factory: Any, label: str, options: dict[str, Any]) -> Any:
        """An instance of ``factory`` (a class or factory function) built with ``options``, or ``factory`` itself when
        it is an instance already.

        :param label: the name used in messages (the registered name, or the object's own).
        :raises TypeError: for options the factory does not accept (naming those it takes), options given with an
            instance, or a built object that is not an instance of the kind.
        """
        kind = self.kind.capitalize()
        if self.is_instance(factory):
            if options:
                raise TypeError(f"{self.options} {sorted(options)} cannot be applied to the {self.noun} instance {factory!r}.")
            return factory
        try:
            signature = inspect.signature(factory)
            signature.bind(**options)
        except TypeError:
            accepted = [p for p in inspect.signature(factory).parameters if p not in ("self", "args", "kwargs")]
            raise TypeError(
                f"{kind} {label!r} does not accept {self.options} {sorted(options)}; it accepts: "
                f"{', '.join(accepted) or '(no options)'}."
            ) from None
        except ValueError:
            pass
        try:
            built = factory(**options)
        except TypeError as exc:  # an option of the wrong type, which the factory's own checks did not name
            if type(exc) is not TypeError:
                raise  # an error of the plugin's own kind says what it means
            quoted = sorted(key for key, value in options.items() if isinstance(value, str) and is_number(value))
            hint = f" {', '.join(quoted)}: a number in quotes is a string; pass it as a number." if quoted else ""
            raise TypeError(f"{kind} {label!r} could not be built with {self.options} {options!r}: {exc}.{hint}") from exc
        if not self.is_instance(built):
            raise TypeError(f"{kind} {label!r} produced {built!r}, which {self.lacks}.")
        try:
            self.check_attributes(label, built)  # an instance may set them in __init__
        except TypeError as exc:
            raise TypeError(f"{kind} {label!r}: {exc}") from None
        return built


def is_number(text: str) -> bool:
    """Whether ``text`` reads as a number (a number written in quotes in a YAML file or after ``-params``)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _a(word: str) -> str:
    """``word`` after its indefinite article: "an estimator", "a PolicyLoss"."""
    return f"{'an' if word[0].lower() in 'aeiou' else 'a'} {word}"


def is_estimator_instance(obj: Any) -> bool:
    return not isinstance(obj, type) and hasattr(obj, "compute") and hasattr(obj, "requires")


def check_requires(requires: Any) -> None:
    """Refuse a ``requires`` that is not a collection of need names (a string would be read as its characters)."""
    if isinstance(requires, (str, bytes)) or not isinstance(requires, Collection):
        raise TypeError(
            f"requires must be a set (a collection) of names such as {{'values'}} or "
            f"frozenset({{'outcome_rewards', 'group_ids'}}), got {requires!r} (a {type(requires).__name__})"
            + (f": write requires = frozenset({{{requires!r}}})" if isinstance(requires, str) else "")
        )
    unknown = set(requires) - set(NEEDS)
    if unknown:
        raise TypeError(f"requires names unknown needs {sorted(unknown)}; known: {sorted(NEEDS)}")


def _check_estimator_attributes(label: str, obj: Any) -> None:
    """``requires`` (on the class, unless a property: then on the instance) names known needs."""
    requires = getattr(obj, "requires", None)
    if requires is not None and not isinstance(requires, property):
        check_requires(requires)


#: What an advantage estimator must be, for messages.
ESTIMATOR_CONTRACT = (
    "an advantage estimator is a class whose instances have a `requires` set of needs (such as {'values'}) and a "
    "method compute(inputs) taking the AdvantageInputs (e.g. a subclass of sb3_grpo.AdvantageEstimator), an instance "
    "of such a class, or a factory function that returns such an instance (called with the advantage_kwargs as "
    "keyword arguments, each with a default)"
)

ESTIMATOR = Interface(
    kind="advantage estimator",
    noun="estimator",
    base="AdvantageEstimator",
    inputs="AdvantageInputs",
    computes="advantages",
    options="advantage_kwargs",
    contract=ESTIMATOR_CONTRACT,
    lacks="has no requires/compute",
    is_instance=is_estimator_instance,
    check_attributes=_check_estimator_attributes,
)


def is_policy_loss_instance(obj: Any) -> bool:
    return not isinstance(obj, type) and callable(getattr(obj, "compute", None))


def check_by_trajectory(label: str, value: Any) -> None:
    """``by_trajectory`` must be True or False (it decides how minibatches are cut)."""
    if isinstance(value, property):
        return  # set per instance: checked on the instance
    if not isinstance(value, bool):
        raise TypeError(
            f"{label}.by_trajectory must be True (minibatches keep whole trajectories, for trajectory-level ratios) or "
            f"False, got {value!r}: {POLICY_LOSS_CONTRACT}"
        )


def _check_policy_loss_attributes(label: str, obj: Any) -> None:
    check_by_trajectory(label, getattr(obj, "by_trajectory", None))


#: What a policy loss must be, for messages.
POLICY_LOSS_CONTRACT = (
    "a policy loss is a class whose instances have a method compute(inputs) taking the PolicyLossInputs and a boolean "
    "class attribute by_trajectory (e.g. a subclass of sb3_grpo.PolicyLoss), an instance of such a class, or a factory "
    "function that returns such an instance (called with the policy_loss_kwargs as keyword arguments, each with a "
    "default)"
)

POLICY_LOSS = Interface(
    kind="policy loss",
    noun="policy loss",
    base="PolicyLoss",
    inputs="PolicyLossInputs",
    computes="the loss",
    options="policy_loss_kwargs",
    contract=POLICY_LOSS_CONTRACT,
    lacks=f"has no compute method: {POLICY_LOSS_CONTRACT}",
    is_instance=is_policy_loss_instance,
    check_attributes=_check_policy_loss_attributes,
)


def check_estimator(name: str, obj: Any, plugin: str) -> None:
    """An estimator is a class (or factory) whose instances have ``requires`` and ``compute(inputs)``, or such an
    instance (see :meth:`Interface.check`)."""
    ESTIMATOR.check(name, obj, plugin)


def check_policy_loss(name: str, obj: Any, plugin: str) -> None:
    """A policy loss is a class (or factory) whose instances have ``compute(inputs)`` and a boolean ``by_trajectory``,
    or such an instance (see :meth:`Interface.check`)."""
    POLICY_LOSS.check(name, obj, plugin)


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
