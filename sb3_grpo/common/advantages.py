"""
The advantage-estimator interface, shared by the algorithms with a critic (SB3's rollout buffer, with values) and
the critic-free ones that score whole trajectories (grouped by start state, or against a running baseline).

Every estimator reads one :class:`AdvantageInputs` and returns one :class:`AdvantageOutputs`. The inputs are
time-major arrays of shape ``(T, B)``:

- *critic layout* (SB3's ``RolloutBuffer``): ``B`` env slots, ``T`` steps per slot; episodes may start in the
  middle of a column (``episode_starts``) and the last row is bootstrapped with ``last_values`` unless
  ``dones`` says the episode ended there.
- *trajectory layout* (group algorithms): each column is one whole trajectory starting at row 0, padded to the longest one;
  ``mask`` marks the real steps. Columns carry an ``outcome_rewards`` entry and a ``group_ids`` entry.

An estimator declares in ``requires`` which of the optional inputs it reads (:data:`NEEDS`). An algorithm
declares what it can provide and refuses, when it is constructed, an estimator whose needs it cannot meet.

GRPO with ``reward_gammas`` (one discount per reward function) also hands over each reward function's per-step
rewards with its own discount, in ``extras[REWARD_STREAMS]``: a list of ``((T, B) rewards, gamma)`` pairs whose
rewards sum to ``rewards``. Only estimators whose ``accepts_reward_streams`` is true are given them
(``group_step_baseline`` with ``lam=1``).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sb3_grpo.plugin_checks import NEEDS

__all__ = [
    "NEEDS",
    "REWARD_STREAMS",
    "AdvantageEstimator",
    "AdvantageInputs",
    "AdvantageOutputs",
    "EstimatorError",
    "check_estimator_needs",
    "group_index",
    "reward_to_go",
    "run_estimator",
]

#: Key of ``AdvantageInputs.extras`` holding per-reward-function ``((T, B) rewards, gamma)`` pairs (see above).
REWARD_STREAMS = "reward_streams"


class EstimatorError(ValueError):
    """An advantage estimator was misused, or returned something unusable."""


@dataclass
class AdvantageInputs:
    """
    What an advantage estimator may read. Arrays are time-major, shape ``(T, B)`` unless stated.

    :param rewards: per-step rewards ``(T, B)``. Critic algorithms pass the env rewards (already bootstrapped
        on time-limit truncation, as SB3 does); GRPO passes the per-step rewards of its reward functions.
    :param episode_starts: ``(T, B)``, 1 where a new episode begins at that row (SB3's ``episode_starts``).
    :param gamma: the algorithm's discount factor.
    :param gae_lambda: the algorithm's GAE lambda.
    :param mask: ``(T, B)`` bool, True on real steps (trajectory layout); ``None`` means every entry is real.
    :param values: ``(T, B)`` critic values V(s_t), or ``None`` for critic-free algorithms.
    :param last_values: ``(B,)`` value of the state that follows the last row of each column.
    :param dones: ``(B,)`` whether the last row of each column ended its episode.
    :param outcome_rewards: ``(B,)`` one outcome reward per column (trajectory layout).
    :param group_ids: ``(B,)`` integer group of each column (trajectory layout).
    :param score_norms: ``(T, B)`` squared norm of the gradient of ``log pi(a_t | s_t)`` with respect to the logits of
        a categorical policy, ``1 - 2 pi(a_t | s_t) + sum_a pi(a | s_t)^2``, under the policy that acted (trajectory
        layout, Discrete action spaces).
    :param observations: ``(T, B, D)`` each step's observation as the policy saw it (normalised where the env is),
        flattened to ``D`` numbers (a Dict observation's keys concatenated in sorted order), zero on padding
        (trajectory layout).
    """

    rewards: np.ndarray
    episode_starts: np.ndarray
    gamma: float
    gae_lambda: float = 1.0
    mask: np.ndarray | None = None
    values: np.ndarray | None = None
    last_values: np.ndarray | None = None
    dones: np.ndarray | None = None
    outcome_rewards: np.ndarray | None = None
    group_ids: np.ndarray | None = None
    score_norms: np.ndarray | None = None
    observations: np.ndarray | None = None
    #: Free-form extras an algorithm may pass to matching estimators (unused by the built-ins).
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rewards = np.asarray(self.rewards)
        if self.rewards.ndim != 2:
            raise EstimatorError(f"AdvantageInputs.rewards must have shape (T, B), got {self.rewards.shape}")
        shape = self.rewards.shape
        self.episode_starts = np.asarray(self.episode_starts)
        for name in ("episode_starts", "mask", "values", "score_norms"):
            value = getattr(self, name)
            if value is not None and np.shape(value) != shape:
                raise EstimatorError(f"AdvantageInputs.{name} must have shape {shape} like rewards, got {np.shape(value)}")
        for name in ("last_values", "dones", "outcome_rewards", "group_ids"):
            value = getattr(self, name)
            if value is not None and np.shape(value) != (shape[1],):
                raise EstimatorError(f"AdvantageInputs.{name} must have shape ({shape[1]},), got {np.shape(value)}")
        if self.observations is not None and (np.ndim(self.observations) != 3 or np.shape(self.observations)[:2] != shape):
            raise EstimatorError(
                f"AdvantageInputs.observations must have shape {(*shape, 'D')}, got {np.shape(self.observations)}"
            )

    @property
    def shape(self) -> tuple[int, int]:
        return self.rewards.shape  # type: ignore[return-value]

    @property
    def valid(self) -> np.ndarray:
        """``(T, B)`` bool: True on real steps."""
        if self.mask is None:
            return np.ones(self.shape, dtype=bool)
        return np.asarray(self.mask, dtype=bool)

    @property
    def lengths(self) -> np.ndarray:
        """``(B,)`` number of real steps in each column."""
        return self.valid.sum(axis=0)

    def broadcast(self, per_column: np.ndarray) -> np.ndarray:
        """Copy one value per column to every real step of that column (zero on padding): ``(B,) -> (T, B)``."""
        per_column = np.asarray(per_column)
        return np.where(self.valid, per_column[None, :], 0.0)

    def provided(self) -> set[str]:
        """The needs (see :data:`NEEDS`) these inputs satisfy."""
        have = {"step_rewards"}
        for need in ("values", "group_ids", "outcome_rewards", "score_norms", "observations"):
            if getattr(self, need) is not None:
                have.add(need)
        return have

    @classmethod
    def from_trajectories(
        cls,
        step_rewards: list[np.ndarray],
        gamma: float,
        outcome_rewards: np.ndarray | None = None,
        group_ids: np.ndarray | None = None,
        terminated: np.ndarray | None = None,
        gae_lambda: float = 1.0,
        reward_streams: list[tuple[list[np.ndarray], float]] | None = None,
        score_norms: list[np.ndarray] | None = None,
        observations: list[np.ndarray] | None = None,
    ) -> AdvantageInputs:
        """Build the trajectory layout: one column per trajectory, padded with zeros, plus the mask.

        :param step_rewards: one array of per-step rewards per trajectory.
        :param gamma: discount factor.
        :param outcome_rewards: ``(B,)`` outcome rewards (defaults to the sum of each trajectory's step rewards).
        :param group_ids: ``(B,)`` group of each trajectory.
        :param terminated: ``(B,)`` whether each trajectory ended in a terminal state (else it was truncated).
        :param reward_streams: ``(per-trajectory rewards, gamma)`` per reward function, laid out like
            ``step_rewards`` into ``extras[REWARD_STREAMS]``.
        :param score_norms: one array of per-step squared score norms per trajectory (see the class), laid out like
            ``step_rewards``.
        :param observations: one ``(L_i, D)`` array of flattened observations per trajectory.
        """
        rewards, mask = _pad_columns(step_rewards)
        horizon, n_columns = rewards.shape
        extras: dict[str, Any] = {}
        if reward_streams is not None:
            extras[REWARD_STREAMS] = [(_pad_columns(stream)[0], float(g)) for stream, g in reward_streams]
        episode_starts = np.zeros((horizon, n_columns), dtype=np.float32)
        if horizon:
            episode_starts[0] = 1.0
        if outcome_rewards is None:
            outcome_rewards = rewards.sum(axis=0)
        dones = np.ones(n_columns, dtype=bool) if terminated is None else np.asarray(terminated, dtype=bool)
        return cls(
            rewards=rewards,
            episode_starts=episode_starts,
            gamma=gamma,
            gae_lambda=gae_lambda,
            mask=mask,
            dones=dones,
            outcome_rewards=np.asarray(outcome_rewards, dtype=np.float64),
            group_ids=None if group_ids is None else np.asarray(group_ids),
            score_norms=None if score_norms is None else _pad_columns(score_norms)[0],
            observations=None if observations is None else _pad_rows(observations, horizon),
            extras=extras,
        )


def _pad_rows(columns: list[np.ndarray], horizon: int) -> np.ndarray:
    """One column per ``(L_i, D)`` array, padded with zero rows to ``horizon``: ``(horizon, B, D)``."""
    width = np.shape(columns[0])[1] if columns else 0
    values = np.zeros((horizon, len(columns), width), dtype=np.float64)
    for column, c in enumerate(columns):
        values[: len(c), column] = c
    return values


def _pad_columns(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One column per array, padded with zeros to the longest: ``((T, B) values, (T, B) mask)``."""
    horizon = max((len(c) for c in columns), default=0)
    values = np.zeros((horizon, len(columns)), dtype=np.float64)
    mask = np.zeros((horizon, len(columns)), dtype=bool)
    for column, c in enumerate(columns):
        values[: len(c), column] = c
        mask[: len(c), column] = True
    return values, mask


@dataclass
class AdvantageOutputs:
    """
    What an estimator returns.

    :param advantages: ``(T, B)`` per-step advantages (zero on padding).
    :param returns: ``(T, B)`` regression targets for a critic (``None`` for critic-free estimators).
    """

    advantages: np.ndarray
    returns: np.ndarray | None = None


class AdvantageEstimator(ABC):
    """
    Base class of advantage estimators.

    Subclasses set ``requires`` (a subset of :data:`NEEDS`) and implement :meth:`compute`. Constructor
    keyword arguments are the estimator's options (``advantage_kwargs`` of the algorithms). Instances may
    keep state between calls (e.g. a running baseline); they are saved with the model.
    """

    #: What :meth:`compute` reads from the inputs, see :data:`NEEDS`.
    requires: frozenset[str] = frozenset()

    @abstractmethod
    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        """Compute advantages (and, for critic estimators, returns).

        :param inputs: the rollout, see :class:`AdvantageInputs`.
        :return: :class:`AdvantageOutputs` with arrays of shape ``inputs.shape``.
        """

    def __repr__(self) -> str:
        options = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in options.items())})"


def estimator_name(estimator: Any) -> str:
    """A readable name for error messages: the registered name if known, else the class name."""
    return getattr(estimator, "_registered_name", None) or type(estimator).__name__


def check_estimator_needs(estimator: Any, provides: set[str] | frozenset[str], algorithm: str, missing_hint: str = "") -> None:
    """Refuse an estimator whose needs an algorithm cannot meet, naming both.

    :param estimator: the estimator instance.
    :param provides: what the algorithm provides (subset of :data:`NEEDS`).
    :param algorithm: the algorithm's name, for the message.
    :param missing_hint: text appended to the error (e.g. the estimators that would fit).
    :raises EstimatorError: if something the estimator requires is not provided.
    """
    missing = set(estimator.requires) - set(provides)
    if missing:
        wants = ", ".join(f"{NEEDS.get(m, m)} ({m!r})" for m in sorted(missing))
        raise EstimatorError(
            f"Advantage estimator {estimator_name(estimator)!r} needs {wants}, which {algorithm} does not provide. "
            f"{missing_hint}".strip()
        )


def run_estimator(estimator: Any, inputs: AdvantageInputs) -> AdvantageOutputs:
    """Call ``estimator.compute`` and check what it returns: the right shape, finite values.

    :raises EstimatorError: naming the estimator when its output is unusable or when it raises.
    """
    name = estimator_name(estimator)
    missing = set(estimator.requires) - inputs.provided()
    if missing:
        raise EstimatorError(f"Advantage estimator {name!r} needs {sorted(missing)} but the inputs do not carry them.")
    try:
        outputs = estimator.compute(inputs)
    except EstimatorError:
        raise
    except Exception as exc:  # a plugin's bug mid-training: say whose it is (the traceback follows as the cause)
        plugin = getattr(estimator, "_registered_plugin", None)  # "<in-process>" for register_advantage_estimator()
        if plugin:
            source = "registered in-process" if plugin.startswith("<") else f"registered by plugin {plugin!r}"
        else:
            source = f"class {type(estimator).__qualname__} in {type(estimator).__module__}"
        raise EstimatorError(f"Advantage estimator {name!r} ({source}) raised: {exc!r}") from exc
    if not isinstance(outputs, AdvantageOutputs):
        if isinstance(outputs, np.ndarray):
            outputs = AdvantageOutputs(advantages=outputs)
        else:
            raise EstimatorError(
                f"Advantage estimator {name!r} returned {type(outputs).__name__}; it must return AdvantageOutputs "
                "(or an array of advantages)."
            )
    for field_name in ("advantages", "returns"):
        value = getattr(outputs, field_name)
        if value is None:
            if field_name == "advantages":
                raise EstimatorError(f"Advantage estimator {name!r} returned no advantages.")
            continue
        value = np.asarray(value)
        if value.shape != inputs.shape:
            raise EstimatorError(
                f"Advantage estimator {name!r} returned {field_name} of shape {value.shape}; expected {inputs.shape} "
                "(time-major, like inputs.rewards)."
            )
        bad = ~np.isfinite(value) & inputs.valid
        if bad.any():
            t, b = np.argwhere(bad)[0]
            raise EstimatorError(
                f"Advantage estimator {name!r} returned a non-finite {field_name[:-1]} ({value[t, b]}) at step {t} of "
                f"column {b} ({int(bad.sum())} non-finite entries in all)."
            )
        setattr(outputs, field_name, value)
    return outputs


# -------------------------------------------------------------------------
# Helpers for estimators
# -------------------------------------------------------------------------


def reward_to_go(rewards: np.ndarray, gamma: float, valid: np.ndarray | None = None) -> np.ndarray:
    """``G_t = r_t + gamma * r_{t+1} + gamma^2 * r_{t+2} + ...`` to the end of each episode (the reverse discounted
    cumulative sum), along the first axis.

    :param rewards: one episode's rewards ``(T,)``, or time-major columns ``(T, B)`` (the trajectory layout).
    :param gamma: discount factor.
    :param valid: same shape as ``rewards``, True on real steps; the sum restarts at every other entry, which gets 0
        (``None``: every entry is real).
    :return: the reward-to-go, float64, shaped as ``rewards``.

    Reference: Sutton & Barto, *Reinforcement Learning: An Introduction* (2nd ed.), section 3.3 (the return).
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    out = np.zeros(rewards.shape, dtype=np.float64)
    running = np.zeros(rewards.shape[1:], dtype=np.float64)
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = rewards[t] + gamma * running if valid is None else np.where(valid[t], rewards[t] + gamma * running, 0.0)
        out[t] = running
    return out


def group_index(group_ids: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Map arbitrary group ids to ``0..n_groups-1``.

    :return: ``(inverse, n_groups, counts)`` where ``inverse[i]`` is the dense group of column ``i``.
    """
    _, inverse, counts = np.unique(np.asarray(group_ids), return_inverse=True, return_counts=True)
    return inverse.reshape(-1), len(counts), counts


def grouped_mean_std(values: np.ndarray, inverse: np.ndarray, n_groups: int, weights: np.ndarray | None = None):
    """Per-group mean and population standard deviation of ``values`` (optionally weighted).

    :return: ``(mean, std, spread)`` each of shape ``(n_groups,)``; ``spread`` is max - min within the group,
        exactly zero when all values of a group are equal (used to return exact zeros, never NaN).
    """
    values = np.asarray(values, dtype=np.float64)
    w = np.ones_like(values) if weights is None else np.asarray(weights, dtype=np.float64)
    total = np.bincount(inverse, weights=w, minlength=n_groups)
    safe_total = np.where(total > 0, total, 1.0)
    mean = np.bincount(inverse, weights=w * values, minlength=n_groups) / safe_total
    var = np.bincount(inverse, weights=w * (values - mean[inverse]) ** 2, minlength=n_groups) / safe_total
    big = np.full(n_groups, -np.inf)
    small = np.full(n_groups, np.inf)
    np.maximum.at(big, inverse[w > 0], values[w > 0])
    np.minimum.at(small, inverse[w > 0], values[w > 0])
    spread = np.where(total > 0, big - small, 0.0)
    return mean, np.sqrt(np.maximum(var, 0.0)), spread


def warn_once(owner: Any, key: str, message: str) -> None:
    """Emit a warning only the first time ``key`` is seen by ``owner`` (an estimator instance: once per model)."""
    seen = owner.__dict__.setdefault("_warned", set())
    if key not in seen:
        seen.add(key)
        warnings.warn(message, stacklevel=3)
