"""
Controllers for an adaptive KL penalty coefficient ``beta``.

A controller holds the current coefficient (its only state, :attr:`KLController.kl_coef`) and, after each policy
update, turns the mean KL divergence ``d`` measured over the update's batch into the next coefficient:

- ``"schulman"`` (PPO paper, Schulman et al. 2017, section 4): ``d < target / 1.5 -> beta / 2``;
  ``d > 1.5 * target -> beta * 2``; otherwise unchanged.
- ``"proportional"`` (Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences", section 2.2):
  ``e = clip(d / target - 1, -0.2, 0.2)``; ``beta *= 1 + e * n_steps / horizon``, with ``n_steps`` the number of
  samples in the batch the measurement covers.
- ``"rllib"`` (RLlib's PPO ``update_kl``): ``d > 2 * target -> beta * 1.5``; ``d < target / 2 -> beta * 0.5``;
  otherwise unchanged.
- ``"fixed"``: ``beta`` never changes (the PPO paper's fixed-KL-penalty baseline).

Every adaptive rule clamps the new coefficient to ``[kl_coef_min, kl_coef_max]``. A measurement that is NaN
leaves the coefficient unchanged (with a warning): it means the update diverged, and no rule can use it.

The controllers name their arguments as :class:`~sb3_grpo.adaptive_kl_ppo.AdaptiveKLPPO` does, so their errors
read the same whichever builds them.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, ClassVar, cast

from sb3_grpo.common.kl_control import adapt_kl_coef

__all__ = [
    "KL_CONTROLLERS",
    "FixedKLController",
    "KLController",
    "ProportionalKLController",
    "RLlibKLController",
    "SchulmanKLController",
    "make_kl_controller",
]


class KLController:
    """
    Base class: holds ``beta`` and its bounds; subclasses implement :meth:`_next` (the raw rule, before clamping).

    :param kl_coef: the initial coefficient ``beta`` (>= 0; > 0 for a multiplicative rule, which cannot leave 0).
    :param target_kl: the KL divergence the rule steers toward (> 0).
    :param kl_coef_min: lower bound on ``beta`` (>= 0).
    :param kl_coef_max: upper bound on ``beta`` (>= ``kl_coef_min``; ``math.inf`` for none).
    """

    name: ClassVar[str] = ""
    #: Whether the rule changes ``beta`` at all (``False`` only for :class:`FixedKLController`).
    adaptive: ClassVar[bool] = True

    def __init__(self, kl_coef: float, target_kl: float, kl_coef_min: float = 0.0, kl_coef_max: float = math.inf):
        _check_number("kl_coef", kl_coef, minimum=0.0)
        _check_number("target_kl", target_kl, exclusive_minimum=0.0)
        _check_number("kl_coef_min", kl_coef_min, minimum=0.0, allow_inf=False)
        _check_number("kl_coef_max", kl_coef_max, minimum=0.0, allow_inf=True)
        if kl_coef_min > kl_coef_max:
            raise ValueError(f"kl_coef_min ({kl_coef_min!r}) must not exceed kl_coef_max ({kl_coef_max!r}).")
        if self.adaptive and kl_coef == 0:
            raise ValueError(
                f"kl_coef must be > 0 with kl_adaptation={self.name!r}: a multiplicative rule cannot move a coefficient "
                "of 0. Use kl_adaptation='fixed' for no penalty at all."
            )
        if self.adaptive and not kl_coef_min <= kl_coef <= kl_coef_max:
            raise ValueError(
                f"kl_coef ({kl_coef!r}) must lie within [kl_coef_min, kl_coef_max] = [{kl_coef_min!r}, {kl_coef_max!r}]."
            )
        self.kl_coef = float(kl_coef)
        self.target_kl = float(target_kl)
        self.kl_coef_min = float(kl_coef_min)
        self.kl_coef_max = float(kl_coef_max)

    def update(self, measured_kl: float, n_steps: int = 1) -> float:
        """Move ``beta`` from the mean KL divergence of the last policy update, and return the new ``beta``.

        :param measured_kl: the mean KL(pi_old || pi_new) over the update's batch.
        :param n_steps: the number of samples (env steps) in that batch (used by the proportional rule only).
        :return: the new coefficient, also stored in :attr:`kl_coef`.
        """
        measured_kl = float(measured_kl)
        if math.isnan(measured_kl):
            warnings.warn(f"{type(self).__name__}: the measured KL is NaN; kl_coef stays at {self.kl_coef}.", stacklevel=2)
            return self.kl_coef
        if not self.adaptive:
            return self.kl_coef
        new = self._next(measured_kl, n_steps)
        self.kl_coef = min(max(new, self.kl_coef_min), self.kl_coef_max)
        return self.kl_coef

    def _next(self, measured_kl: float, n_steps: int) -> float:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to rebuild the controller (configuration and current ``beta``)."""
        state = {"name": self.name, "kl_coef": self.kl_coef, "target_kl": self.target_kl}
        state.update(kl_coef_min=self.kl_coef_min, kl_coef_max=self.kl_coef_max)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the controller's ``name`` must match)."""
        if state.get("name", self.name) != self.name:
            raise ValueError(f"Cannot load the state of a {state['name']!r} KL controller into a {self.name!r} one.")
        for key, value in state.items():
            if key != "name":
                setattr(self, key, float(value))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.state_dict().items() if k != "name")
        return f"{type(self).__name__}({args})"


class FixedKLController(KLController):
    """Keeps ``beta`` constant (the PPO paper's fixed-KL-penalty variant)."""

    name = "fixed"
    adaptive = False


class SchulmanKLController(KLController):
    """The PPO paper's rule: halve ``beta`` when ``d < target / 1.5``, double it when ``d > 1.5 * target``."""

    name = "schulman"

    def _next(self, measured_kl: float, n_steps: int) -> float:
        if measured_kl < self.target_kl / 1.5:
            return self.kl_coef / 2.0
        if measured_kl > self.target_kl * 1.5:
            return self.kl_coef * 2.0
        return self.kl_coef


class RLlibKLController(KLController):
    """RLlib's PPO rule: ``beta * 1.5`` when ``d > 2 * target``, ``beta * 0.5`` when ``d < target / 2``."""

    name = "rllib"

    def _next(self, measured_kl: float, n_steps: int) -> float:
        if measured_kl > 2.0 * self.target_kl:
            return self.kl_coef * 1.5
        if measured_kl < 0.5 * self.target_kl:
            return self.kl_coef * 0.5
        return self.kl_coef


class ProportionalKLController(KLController):
    """
    Ziegler et al. (2019)'s proportional controller: ``e = clip(d / target - 1, -0.2, 0.2)``,
    ``beta *= 1 + e * n_steps / horizon`` (:func:`~sb3_grpo.common.kl_control.adapt_kl_coef`, also GRPO's
    ``kl_target``).

    :param kl_horizon: the controller's horizon in samples (> 0; Ziegler et al. use 10,000). Per update ``beta``
        moves by at most a factor ``1 +- 0.2 * n_steps / kl_horizon``.
    """

    name = "proportional"

    def __init__(
        self,
        kl_coef: float,
        target_kl: float,
        kl_coef_min: float = 0.0,
        kl_coef_max: float = math.inf,
        kl_horizon: float = 10_000,
    ):
        super().__init__(kl_coef, target_kl, kl_coef_min, kl_coef_max)
        _check_number("kl_horizon", kl_horizon, exclusive_minimum=0.0)
        self.kl_horizon = float(kl_horizon)

    def _next(self, measured_kl: float, n_steps: int) -> float:
        return adapt_kl_coef(self.kl_coef, measured_kl, self.target_kl, n_steps, self.kl_horizon)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "kl_horizon": self.kl_horizon}


#: Rule name -> controller class (the values ``kl_adaptation`` accepts).
KL_CONTROLLERS: dict[str, type[KLController]] = {
    cls.name: cls for cls in (SchulmanKLController, ProportionalKLController, RLlibKLController, FixedKLController)
}


def make_kl_controller(
    kl_adaptation: str,
    kl_coef: float,
    target_kl: float,
    kl_coef_min: float = 0.0,
    kl_coef_max: float = math.inf,
    kl_horizon: float = 10_000,
) -> KLController:
    """Build the controller named ``kl_adaptation`` (one of :data:`KL_CONTROLLERS`).

    ``kl_horizon`` is used by ``"proportional"`` only (and checked only there).

    :raises ValueError: for an unknown name or an invalid argument, naming the argument.
    """
    if not isinstance(kl_adaptation, str) or kl_adaptation not in KL_CONTROLLERS:
        raise ValueError(f"Unknown kl_adaptation {kl_adaptation!r}; choose one of {sorted(KL_CONTROLLERS)}.")
    cls = KL_CONTROLLERS[kl_adaptation]
    if cls is ProportionalKLController:
        return ProportionalKLController(kl_coef, target_kl, kl_coef_min, kl_coef_max, kl_horizon=kl_horizon)
    return cls(kl_coef, target_kl, kl_coef_min, kl_coef_max)


def _check_number(
    name: str,
    value: Any,
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    allow_inf: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}.")
    if math.isinf(value) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {value!r}.")
    number = cast(float, value)  # a numbers.Real compares like a float; typeshed's Real declares no comparisons
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}.")
    if exclusive_minimum is not None and not number > exclusive_minimum:
        raise ValueError(f"{name} must be > {exclusive_minimum}, got {value!r}.")
