"""
Scoring finished trajectories with reward functions (GRPO's outcome rewards): the :class:`Trajectory` they read,
the checks of what they return and :class:`RewardCombiner`.

A reward function is any callable taking one :class:`Trajectory` and returning a float (one outcome reward for
the whole trajectory) or an array of shape ``(trajectory.length,)`` (per-step rewards whose sum is the outcome).
Several functions combine with weights through :class:`RewardCombiner`, in one of the two aggregation modes
known from TRL's GRPO trainer:

- ``"sum_then_normalize"``: weighted sum of the raw scores; the advantage estimator normalises the sum.
- ``"normalize_then_sum"``: each function's outcomes are z-scored within their group first, then weighted and
  summed (so a function with a large scale cannot drown the others).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sb3_grpo.common.advantages import group_index, grouped_mean_std
from sb3_grpo.plugin_checks import RewardFunctionError, check_reward_function_signature, function_name

__all__ = ["RewardCombiner", "RewardFunctionError", "Trajectory", "check_reward_function_signature", "score_trajectory"]

AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")


@dataclass(frozen=True)
class Trajectory:
    """
    One finished trajectory, as seen by reward functions.

    :param observations: ``(L, *obs_shape)`` observations the policy acted on (a dict of such arrays for Dict
        spaces); after ``VecNormalize`` if the env has one.
    :param actions: ``(L, *action_shape)`` actions taken (before clipping to the action space).
    :param rewards: ``(L,)`` per-step rewards from the env (unnormalised, even under ``VecNormalize``).
    :param infos: the ``info`` dict of each step (length ``L``).
    :param terminated: the episode reached a terminal state.
    :param truncated: the episode was cut by a time limit.
    :param gamma: the algorithm's discount factor.
    :param group_id: the group this trajectory belongs to (members share a start state).
    :param member: index of the trajectory within its group.
    :param index: index of the trajectory in the batch.
    """

    observations: Any
    actions: np.ndarray
    rewards: np.ndarray
    infos: list[dict[str, Any]]
    terminated: bool
    truncated: bool
    gamma: float = 0.99
    group_id: int = 0
    member: int = 0
    index: int = 0

    @property
    def length(self) -> int:
        return len(self.rewards)

    def describe(self) -> str:
        return (
            f"trajectory {self.index} (group {self.group_id}, member {self.member}, length {self.length}, "
            f"{'terminated' if self.terminated else 'truncated' if self.truncated else 'unfinished'})"
        )


def score_trajectory(fn: Callable, trajectory: Trajectory, name: str | None = None) -> np.ndarray:
    """Call one reward function and return per-step rewards ``(L,)`` (a float output lands on the last step).

    :raises RewardFunctionError: naming the function and the trajectory on a wrong shape, NaN or inf.
    """
    label = name or function_name(fn)
    try:
        raw = fn(trajectory)
    except RewardFunctionError as exc:
        raise RewardFunctionError(f"Reward function {label!r} on {trajectory.describe()}: {exc}") from exc
    except Exception as exc:
        raise RewardFunctionError(f"Reward function {label!r} raised on {trajectory.describe()}: {exc!r}") from exc
    length = trajectory.length
    out = _as_rewards(raw, label, trajectory)
    if out.ndim == 0 or (out.shape == (1,) and length != 1):
        per_step = np.zeros(length, dtype=np.float64)
        per_step[-1] = float(out.reshape(-1)[0])
    elif out.shape == (length,):
        per_step = out
    else:
        pair = " (a (score, info) pair? return the score alone)" if isinstance(raw, tuple) and len(raw) == 2 else ""
        raise RewardFunctionError(
            f"Reward function {label!r} returned shape {out.shape}{pair} on {trajectory.describe()}; it must return one "
            f"number (a float for the whole trajectory) or an array of shape ({length},)."
        )
    if not np.all(np.isfinite(per_step)):
        raise RewardFunctionError(
            f"Reward function {label!r} returned a non-finite value ({raw!r}) on {trajectory.describe()}."
        )
    return per_step


def _as_rewards(raw: Any, label: str, trajectory: Trajectory) -> np.ndarray:
    """``raw`` as a float64 array, or an error naming the function, the trajectory and what it returned."""
    shown = repr(raw)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    problem = None
    if raw is None:
        problem = "returned None (a missing return statement?)"
    elif isinstance(raw, (str, bytes, dict)):
        problem = f"returned {shown} (a {type(raw).__name__})"
    else:
        try:
            return np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError):
            pair = " (a (score, info) pair? return the score alone)" if isinstance(raw, tuple) else ""
            problem = f"returned {shown} (a {type(raw).__name__}){pair}"
    raise RewardFunctionError(
        f"Reward function {label!r} {problem} on {trajectory.describe()}; it must return one number (a float for the "
        f"whole trajectory) or an array of per-step rewards of shape ({trajectory.length},)."
    )


class RewardCombiner:
    """
    Score trajectories with several reward functions and combine them with weights.

    :param functions: ``(name, callable)`` pairs.
    :param weights: one weight per function (default: all 1).
    :param aggregation: ``"sum_then_normalize"`` or ``"normalize_then_sum"`` (see module docstring).
    :param eps: added to group standard deviations in ``normalize_then_sum``.
    """

    def __init__(
        self,
        functions: Sequence[tuple[str, Callable]],
        weights: Sequence[float] | None = None,
        aggregation: str = "sum_then_normalize",
        eps: float = 1e-4,
    ):
        if len(functions) == 0:
            raise RewardFunctionError("reward_functions is empty: give at least one (default: ['episodic_return']).")
        if weights is None:
            weights = [1.0] * len(functions)
        if len(weights) != len(functions):
            raise RewardFunctionError(
                f"reward_weights has {len(weights)} entries but reward_functions has {len(functions)}: give one weight per "
                "function."
            )
        if not all(np.isfinite(w) for w in weights):
            raise RewardFunctionError(f"reward_weights must be finite, got {list(weights)}")
        if aggregation not in AGGREGATIONS:
            raise RewardFunctionError(f"reward_aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        self.functions = list(functions)
        self.weights = [float(w) for w in weights]
        self.aggregation = aggregation
        self.eps = eps

    def __call__(self, trajectories: Sequence[Trajectory]) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """Score a batch of finished trajectories.

        :return: ``(outcomes, step_rewards, per_function)``: ``(B,)`` combined outcome rewards, one ``(L_i,)``
            array of combined per-step rewards per trajectory (summing to the outcome up to a per-group constant
            in ``normalize_then_sum`` mode), and ``(n_functions, B)`` raw outcome of each function (for logging).
        """
        outcomes, steps, raw_outcomes, _ = self.score(trajectories)
        return outcomes, steps, raw_outcomes

    def score(
        self, trajectories: Sequence[Trajectory]
    ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray, list[list[np.ndarray]]]:
        """As :meth:`__call__`, plus each function's contribution to the per-step rewards.

        :return: ``(outcomes, step_rewards, per_function, streams)``; ``streams[k][i]`` is function k's weighted
            (and, in ``normalize_then_sum`` mode, scaled) per-step rewards of trajectory i: summed over k they give
            ``step_rewards[i]``.
        """
        n = len(trajectories)
        per_step = [[score_trajectory(fn, traj, name) for traj in trajectories] for name, fn in self.functions]
        raw_outcomes = np.array([[s.sum() for s in scores] for scores in per_step], dtype=np.float64).reshape(-1, n)
        if self.aggregation == "sum_then_normalize":
            scales = np.ones_like(raw_outcomes)
            shifts = np.zeros_like(raw_outcomes)
        else:
            inverse, n_groups, _ = group_index(np.array([t.group_id for t in trajectories]))
            scales = np.empty_like(raw_outcomes)
            shifts = np.empty_like(raw_outcomes)
            for k in range(len(self.functions)):
                mean, std, spread = grouped_mean_std(raw_outcomes[k], inverse, n_groups)
                flat = spread[inverse] == 0.0
                scales[k] = np.where(flat, 0.0, 1.0 / (std[inverse] + self.eps))
                shifts[k] = np.where(flat, 0.0, mean[inverse])
        outcomes = np.zeros(n, dtype=np.float64)
        steps = [np.zeros(t.length, dtype=np.float64) for t in trajectories]
        streams: list[list[np.ndarray]] = []
        for k, weight in enumerate(self.weights):
            outcomes += weight * (raw_outcomes[k] - shifts[k]) * scales[k]
            streams.append([weight * scales[k, i] * per_step[k][i] for i in range(n)])
            for i in range(n):
                steps[i] += streams[k][i]
        return outcomes, steps, raw_outcomes, streams
