"""
A training in stages as one ``learn`` call: :class:`SwitchArguments` changes a model's arguments once it has trained
a given number of env steps, as a user would between two ``learn`` calls (save, load with the new arguments, learn
on), so that such a training is one zoo entry. The algorithms' ``learn`` (``AlgorithmMixin.learn``) carries the
switch out between two rollouts.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Iterator
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.type_aliases import MaybeCallback

from sb3_grpo.common.arguments import constructor_arguments, located

__all__ = ["SwitchArguments", "switches_in"]

#: ``load``'s own parameters: not arguments of the model, so not something to switch to.
_NOT_ARGUMENTS = frozenset({"policy", "env", "device", "path", "custom_objects"})


class SwitchArguments(BaseCallback):
    """
    Change the model's arguments once it has trained ``at`` env steps, within one ``learn`` call.

    When ``num_timesteps`` reaches ``at``, training stops (the rollout in progress is dropped, as for any callback
    that stops training), the model is saved and loaded back with ``arguments`` as keyword arguments of ``load``
    (checked as ``load`` checks them; the policy, the optimiser's state, the random number generators' state and
    the step count carry over; the env is reset, as ``load`` does), and ``learn`` goes on to the steps it was asked
    for, its schedules keeping their progress. The same as::

        model.learn(total, callback=<a callback that stops training at ``at`` steps>)
        model.save("stage")
        model = type(model).load("stage", env=model.get_env(), **arguments)
        model.learn(total - model.num_timesteps, reset_num_timesteps=False)

    but the model object stays the same, so the other callbacks and references to it keep working. The arguments
    are checked when ``learn`` starts, not when the switch comes. Each ``SwitchArguments`` switches once; several
    make several stages. With ``progress_bar=True`` each stage shows its own bar.

    In an rl-zoo config (``sb3-grpo-zoo train``), the two-stage Hopper-v5 training of the long-episodes guide::

        callback:
          - sb3_grpo.SwitchArguments:
              at: 500000
              arguments:
                reward_functions: [without_healthy_reward, healthy_reward]
                reward_gammas: [0.97, 0.999]

    :param at: the env steps (the model's ``num_timesteps``) at which to switch; a model that has trained as many
        already when ``learn`` starts (``reset_num_timesteps=False``) switches before its first rollout.
    :param arguments: the constructor arguments to change, by name, as ``load`` takes them.
    :param verbose: 1: print a line when the switch happens.
    """

    def __init__(self, at: int, arguments: dict[str, Any], verbose: int = 0):
        super().__init__(verbose)
        if isinstance(at, bool) or not isinstance(at, numbers.Real) or not float(at).is_integer() or at <= 0:
            raise ValueError(f"SwitchArguments: at must be a positive whole number of env steps, got {at!r}")
        if not isinstance(arguments, dict) or not arguments or not all(isinstance(k, str) for k in arguments):
            raise ValueError(
                "SwitchArguments: arguments must be a non-empty dict of constructor arguments by name, e.g. "
                f"{{'ent_coef': 0.0}}, got {arguments!r}"
            )
        self.at: int = int(at)
        self.arguments: dict[str, Any] = dict(arguments)
        #: True once training stopped at ``at`` for this switch (the algorithm's ``learn`` then carries it out).
        self.due: bool = False
        #: True once the switch was carried out: it does not happen again.
        self.switched: bool = False

    def check(self, model: Any) -> None:
        """Refuse, before any training, arguments that ``model``'s class does not take, other ``policy_kwargs``,
        values its constructor's checks refuse, and an advantage estimator the arguments do not fit (the checks run on
        a shallow copy of the model with the arguments set; a new estimator is built there as ``load`` will build
        it)."""
        accepted = constructor_arguments(type(model)) - _NOT_ARGUMENTS
        unknown = sorted(set(self.arguments) - accepted)
        if unknown:
            raise ValueError(
                f"SwitchArguments: {type(model).__name__} takes no argument {', '.join(map(repr, unknown))}; it takes "
                f"{', '.join(sorted(accepted))}"
            )
        if "policy_kwargs" in self.arguments and self.arguments["policy_kwargs"] != model.policy_kwargs:
            raise ValueError(
                "SwitchArguments: policy_kwargs cannot change partway through training (the network the policy has "
                f"is the one it keeps; load refuses other policy_kwargs): {self.arguments['policy_kwargs']!r} is not "
                f"the model's {model.policy_kwargs!r}"
            )
        trial = copy.copy(model)
        trial.__dict__.update(self.arguments)
        where = f"given to SwitchArguments(at={self.at})"
        trial._check_arguments_again(where)
        try:
            if any(name in self.arguments for name in getattr(model, "estimator_arguments", ())):
                trial._estimator = None  # load builds it again from the arguments: build it now, as load will
                trial._setup_estimator()
            trial._check_estimator()
        except ValueError as exc:
            raise located(exc, where) from None

    def _on_step(self) -> bool:
        if not self.switched and self.num_timesteps >= self.at:
            self.due = True
            return False
        return True


def switches_in(callback: MaybeCallback) -> Iterator[SwitchArguments]:
    """The :class:`SwitchArguments` among ``callback`` (one callback, a list of them or a ``CallbackList``, nested)."""
    if isinstance(callback, SwitchArguments):
        yield callback
    elif isinstance(callback, CallbackList):
        yield from (s for c in callback.callbacks for s in switches_in(c))
    elif isinstance(callback, list):
        yield from (s for c in callback for s in switches_in(c))
