"""Small helpers shared by the three algorithms."""

from __future__ import annotations

from typing import Any

from sb3_grpo.common.advantages import check_estimator_needs
from sb3_grpo.plugins import get_advantage_estimator, registered_advantage_estimators

__all__ = ["CRITIC_PROVIDES", "GROUP_PROVIDES", "ClampedProgressMixin", "make_advantage_estimator"]

#: What a critic algorithm (ExactTRPO, AdaptiveKLPPO) hands to advantage estimators.
CRITIC_PROVIDES = frozenset({"values", "step_rewards"})
#: What GRPO hands to advantage estimators.
GROUP_PROVIDES = frozenset({"outcome_rewards", "group_ids", "step_rewards"})


class ClampedProgressMixin:
    """
    Keeps the remaining progress that schedules see (learning rate, clip range) at 0 or above.

    SB3 computes ``1 - num_timesteps / total_timesteps``, which goes negative when the last rollout overshoots the
    budget; a linear schedule (``lin_<x>``: ``progress * x``) then gives a *negative* learning rate for the last
    update, i.e. gradient ascent on the loss. GRPO's rollouts run whole groups of episodes, so they overshoot by up to
    G episodes (6% of a 100k CartPole run: one such update took a policy from 485 to 192). Clamped, the last update
    uses the schedule's final value.
    """

    _current_progress_remaining: float

    def _update_current_progress_remaining(self, num_timesteps: int, total_timesteps: int) -> None:
        super()._update_current_progress_remaining(num_timesteps, total_timesteps)  # type: ignore[misc]
        self._current_progress_remaining = max(0.0, self._current_progress_remaining)


def fitting_estimators(provides: frozenset[str]) -> list[str]:
    """Registered estimator names whose (class-level) needs ``provides`` meets."""
    names = []
    for name, obj in registered_advantage_estimators().items():
        requires = getattr(obj, "requires", None)
        if requires is None or isinstance(requires, property) or set(requires) <= set(provides):
            names.append(name)
    return sorted(names)


def make_advantage_estimator(
    algorithm: str, advantage_estimator: Any, advantage_kwargs: dict[str, Any] | None, provides: frozenset[str]
) -> Any:
    """Resolve, instantiate and check an estimator for an algorithm.

    :param algorithm: the algorithm's name (for messages).
    :param advantage_estimator: a registered name, an estimator class or an instance.
    :param advantage_kwargs: options for the estimator.
    :param provides: what the algorithm provides (:data:`CRITIC_PROVIDES` or :data:`GROUP_PROVIDES`).
    :raises sb3_grpo.common.advantages.EstimatorError: if the estimator needs something the algorithm lacks,
        naming both and listing the estimators that fit.
    """
    estimator = get_advantage_estimator(advantage_estimator, **(advantage_kwargs or {}))
    check_estimator_needs(
        estimator, provides, algorithm, f"Estimators that fit {algorithm}: {', '.join(fitting_estimators(provides))}."
    )
    return estimator
