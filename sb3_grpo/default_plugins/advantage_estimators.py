"""
Built-in advantage estimators, registered through the same hook as third-party ones.

Critic estimators (need ``values``): ``gae``, ``n_step``, ``td``, ``monte_carlo``.
Group estimators (critic-free): ``group_zscore``, ``group_mean``, ``leave_one_out``, ``group_process``,
``reinforce_baseline``, ``group_step_baseline``, ``group_auto`` (GRPO's default: ``group_zscore`` or
``group_step_baseline``, whichever fits the batch's rewards).
The estimators of verl's registry that these do not cover (``reinforce_plus_plus``, ``reinforce_plus_plus_baseline``,
``grpo_passk``, ``optimal_token_baseline``) are in :mod:`sb3_grpo.default_plugins.verl_estimators`, registered here.

Sources:
- GAE: Schulman et al. 2016, https://arxiv.org/abs/1506.02438 (identical to SB3's ``RolloutBuffer``)
- n-step / A3C returns: Mnih et al. 2016, https://arxiv.org/abs/1602.01783
- GRPO outcome supervision and process supervision: Shao et al. 2024 (DeepSeekMath), https://arxiv.org/abs/2402.03300
- Dr. GRPO (no std scaling): Liu et al. 2025, https://arxiv.org/abs/2503.20783
- RLOO (verl's ``rloo``, TRL's ``RLOOTrainer``): Ahmadian et al. 2024, https://arxiv.org/abs/2402.14740
- Per-step group baseline over shared starts: the "vine" idea of TRPO (Schulman et al. 2015, section 5.2)
"""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.running_mean_std import RunningMeanStd

from sb3_grpo.common.advantages import (
    REWARD_STREAMS,
    AdvantageEstimator,
    AdvantageInputs,
    AdvantageOutputs,
    EstimatorError,
    group_index,
    grouped_mean_std,
    reward_to_go,
    warn_once,
)
from sb3_grpo.default_plugins import register_each
from sb3_grpo.default_plugins.verl_estimators import VERL_ESTIMATORS
from sb3_grpo.hookspecs import hookimpl

SCALES = ("group", "batch", "none")


def _check_scale(scale: str, estimator: str) -> str:
    if scale not in SCALES:
        raise EstimatorError(f"{estimator}: scale must be one of {SCALES}, got {scale!r}")
    return scale


def _require_critic_layout(inputs: AdvantageInputs, estimator: str) -> None:
    if inputs.mask is not None and not np.all(inputs.mask):
        raise EstimatorError(f"{estimator} works on the critic layout (every entry a real step); got a padded mask.")
    if inputs.values is None or inputs.last_values is None or inputs.dones is None:
        raise EstimatorError(f"{estimator} needs values, last_values and dones (a critic).")


# -------------------------------------------------------------------------
# Critic estimators
# -------------------------------------------------------------------------


class GAE(AdvantageEstimator):
    """
    Generalized Advantage Estimation, computed exactly as SB3's ``RolloutBuffer.compute_returns_and_advantage``
    (same float32 arithmetic, same treatment of ``episode_starts``/``dones``). Returns are the TD(lambda) targets
    ``advantages + values``.

    :param gae_lambda: overrides the algorithm's ``gae_lambda`` when given.
    """

    requires = frozenset({"values", "step_rewards"})
    fixed_lambda: float | None = None

    def __init__(self, gae_lambda: float | None = None):
        if gae_lambda is not None and not 0.0 <= gae_lambda <= 1.0:
            raise EstimatorError(f"gae: gae_lambda must be in [0, 1], got {gae_lambda}")
        self.gae_lambda = gae_lambda

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        _require_critic_layout(inputs, type(self).__name__)
        lam = self.fixed_lambda if self.fixed_lambda is not None else self.gae_lambda
        lam = inputs.gae_lambda if lam is None else lam
        gamma = inputs.gamma
        rewards = np.asarray(inputs.rewards, dtype=np.float32)
        values = np.asarray(inputs.values, dtype=np.float32)
        episode_starts = np.asarray(inputs.episode_starts, dtype=np.float32)
        last_values = np.asarray(inputs.last_values, dtype=np.float32).reshape(-1)
        dones = np.asarray(inputs.dones)
        n_steps = rewards.shape[0]
        advantages = np.zeros_like(rewards)
        last_gae_lam: np.ndarray | int = 0
        for step in reversed(range(n_steps)):
            if step == n_steps - 1:
                next_non_terminal = 1.0 - dones.astype(np.float32)
                next_values = last_values
            else:
                next_non_terminal = 1.0 - episode_starts[step + 1]
                next_values = values[step + 1]
            delta = rewards[step] + gamma * next_values * next_non_terminal - values[step]
            last_gae_lam = delta + gamma * lam * next_non_terminal * last_gae_lam
            advantages[step] = last_gae_lam
        return AdvantageOutputs(advantages=advantages, returns=advantages + values)


class TD(GAE):
    """One-step temporal-difference advantage ``r_t + gamma V(s_{t+1}) - V(s_t)`` (GAE with lambda = 0)."""

    fixed_lambda = 0.0

    def __init__(self) -> None:
        super().__init__(gae_lambda=None)


class MonteCarlo(GAE):
    """Reward-to-go minus value (GAE with lambda = 1), bootstrapped with V only where the rollout cuts an episode."""

    fixed_lambda = 1.0

    def __init__(self) -> None:
        super().__init__(gae_lambda=None)


class NStep(AdvantageEstimator):
    """
    k-step (A3C-style) advantage: ``G_t^(k) - V(s_t)`` with
    ``G_t^(k) = r_t + gamma r_{t+1} + ... + gamma^(m-1) r_{t+m-1} + gamma^m V(s_{t+m})``,
    ``m = k`` unless the episode ends first (no bootstrap after a terminal step) or the rollout ends first
    (bootstrap with the value of the next state). Returns are ``G_t^(k)``.

    :param n: number of reward steps ``k`` (>= 1).
    """

    requires = frozenset({"values", "step_rewards"})

    def __init__(self, n: int = 5):
        if int(n) != n or n < 1:
            raise EstimatorError(f"n_step: n must be a positive integer, got {n!r}")
        self.n = int(n)

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        _require_critic_layout(inputs, "n_step")
        gamma = float(inputs.gamma)
        rewards = np.asarray(inputs.rewards, dtype=np.float64)
        values = np.asarray(inputs.values, dtype=np.float64)
        n_steps, n_cols = rewards.shape
        # Row s+1 of these arrays describes "what follows step s": does the episode go on, and its value.
        # Row n_steps is the state after the rollout (last_values, dones).
        cont = np.ones((n_steps + 1, n_cols))
        cont[1:n_steps] = 1.0 - np.asarray(inputs.episode_starts, dtype=np.float64)[1:]
        cont[n_steps] = 1.0 - np.asarray(inputs.dones, dtype=np.float64)
        next_values = np.zeros((n_steps + 1, n_cols))
        next_values[1:n_steps] = values[1:]
        next_values[n_steps] = np.asarray(inputs.last_values, dtype=np.float64).reshape(-1)

        t = np.arange(n_steps)
        returns = np.zeros((n_steps, n_cols))
        alive = np.ones((n_steps, n_cols))
        discount = 1.0
        for i in range(self.n):
            s = t + i
            inside = s < n_steps
            if not inside.any():
                break
            s_in = s[inside]
            returns[inside] += discount * alive[inside] * rewards[s_in]
            discount *= gamma
            go_on = cont[s_in + 1]
            stop_here = (i == self.n - 1) | (s_in + 1 == n_steps)
            returns[inside] += np.where(stop_here[:, None], discount * alive[inside] * go_on * next_values[s_in + 1], 0.0)
            alive[inside] *= np.where(stop_here[:, None], 0.0, go_on)
        return AdvantageOutputs(advantages=returns - values, returns=returns)


# -------------------------------------------------------------------------
# Group (critic-free) estimators
# -------------------------------------------------------------------------


class _GroupOutcome(AdvantageEstimator):
    """Outcome supervision: one advantage per trajectory, broadcast to all its steps."""

    requires = frozenset({"outcome_rewards", "group_ids"})
    default_scale = "group"
    label = "group"

    def __init__(self, scale: str | None = None, eps: float = 1e-4):
        self.scale = _check_scale(self.default_scale if scale is None else scale, self.label)
        if eps <= 0:
            raise EstimatorError(f"{self.label}: eps must be positive, got {eps}")
        self.eps = float(eps)

    def baseline(self, rewards: np.ndarray, inverse: np.ndarray, n_groups: int, counts: np.ndarray) -> np.ndarray:
        mean, _, _ = grouped_mean_std(rewards, inverse, n_groups)
        return mean[inverse]

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        rewards = np.asarray(inputs.outcome_rewards, dtype=np.float64)
        inverse, n_groups, counts = group_index(inputs.group_ids)
        centered = rewards - self.baseline(rewards, inverse, n_groups, counts)
        _, std, spread = grouped_mean_std(rewards, inverse, n_groups)
        flat = spread[inverse] == 0.0
        centered[flat] = 0.0  # all-equal groups: exactly zero, never NaN
        if self.scale == "group":
            centered = centered / (std[inverse] + self.eps)
        elif self.scale == "batch":
            centered = centered / (centered.std() + self.eps)
        centered[flat] = 0.0
        return AdvantageOutputs(advantages=inputs.broadcast(centered))


class GroupZScore(_GroupOutcome):
    """GRPO (DeepSeekMath outcome supervision): ``(R_i - mean_g) / (std_g + eps)``.

    ``scale`` names the same three choices as TRL's ``scale_rewards``; ``"none"`` is identical, the other two differ
    in the standard deviation. TRL (``GRPOTrainer``) divides by the sample (Bessel-corrected) standard deviation: of
    the group's rewards for ``"group"``, of the raw rewards over the whole batch for ``"batch"``. Here ``"group"``
    takes the group's population standard deviation (so TRL's advantages are these times about
    ``sqrt((G - 1) / G)`` for groups of ``G``), and ``"batch"`` the population standard deviation of the centred
    rewards ``R_i - mean_g`` over the batch, which leaves out the spread between the groups' means (TRL's is at
    least as large, and its advantages as small).

    :param scale: ``"group"`` (default: divide by the group's population std), ``"batch"`` (divide by the std of
        the centred rewards over the whole batch) or ``"none"``.
    :param eps: added to the standard deviation (TRL's is ``1e-4`` too).
    """

    label = "group_zscore"


class GroupMean(_GroupOutcome):
    """Dr. GRPO: ``R_i - mean_g`` (no scaling by default; ``scale`` as in ``group_zscore``)."""

    default_scale = "none"
    label = "group_mean"


class LeaveOneOut(_GroupOutcome):
    """RLOO (verl's ``rloo``, TRL's ``RLOOTrainer``): ``R_i - mean_{j != i} R_j`` over the other members of the
    group, which is ``G / (G - 1) * (R_i - mean_g)`` for a group of ``G``. A group of one gets zero (verl's keeps its
    outcome).

    :param scale: as in ``group_zscore`` (default ``"none"``).
    """

    default_scale = "none"
    label = "leave_one_out"

    def baseline(self, rewards: np.ndarray, inverse: np.ndarray, n_groups: int, counts: np.ndarray) -> np.ndarray:
        sums = np.bincount(inverse, weights=rewards, minlength=n_groups)
        n = counts[inverse]
        if (counts < 2).any():
            warn_once(self, "leave_one_out_singleton", "leave_one_out: a group has a single member; its advantage is zero.")
        others = np.where(n > 1, (sums[inverse] - rewards) / np.maximum(n - 1, 1), rewards)
        return others


class ReinforceBaseline(AdvantageEstimator):
    """
    REINFORCE with a running-mean baseline: ``R_i - b`` where ``b`` is an exponential moving average of the
    mean outcome of past batches (before any past batch exists, the current batch's mean). The baseline is
    part of the estimator's state and is saved with the model.

    :param decay: weight of the old baseline in ``b <- decay * b + (1 - decay) * mean(R)``.
    :param scale: ``"none"`` (default), ``"batch"`` or ``"group"`` (the latter needs group ids).
    :param eps: added to the standard deviation when scaling.
    """

    requires = frozenset({"outcome_rewards"})

    def __init__(self, decay: float = 0.9, scale: str = "none", eps: float = 1e-4):
        if not 0.0 <= decay < 1.0:
            raise EstimatorError(f"reinforce_baseline: decay must be in [0, 1), got {decay}")
        self.decay = float(decay)
        self.scale = _check_scale(scale, "reinforce_baseline")
        self.eps = float(eps)
        self.baseline: float | None = None
        self.requires = frozenset({"outcome_rewards", "group_ids"} if scale == "group" else {"outcome_rewards"})

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        rewards = np.asarray(inputs.outcome_rewards, dtype=np.float64)
        batch_mean = float(rewards.mean())
        baseline = batch_mean if self.baseline is None else self.baseline
        advantages = rewards - baseline
        if self.scale == "group":
            inverse, n_groups, _ = group_index(inputs.group_ids)
            _, std, _ = grouped_mean_std(rewards, inverse, n_groups)
            advantages = advantages / (std[inverse] + self.eps)
        elif self.scale == "batch":
            advantages = advantages / (rewards.std() + self.eps)
        self.baseline = batch_mean if self.baseline is None else self.decay * self.baseline + (1 - self.decay) * batch_mean
        return AdvantageOutputs(advantages=inputs.broadcast(advantages))


class GroupProcess(AdvantageEstimator):
    """
    DeepSeekMath process supervision: every per-step reward is normalised with the mean and std of all
    per-step rewards of its group, and the advantage of step t is the sum of the normalised rewards from t on
    (discounted with the algorithm's gamma when ``discounted=True``). A group whose per-step rewards are all
    equal (CartPole's constant +1) gives zero advantage; if that holds for the whole batch, a warning says so.

    :param discounted: discount the sum of normalised rewards with the algorithm's gamma.
    :param scale: ``"group"`` (default), ``"batch"`` or ``"none"``, as in ``group_zscore``.
    :param eps: added to the standard deviation.
    """

    requires = frozenset({"step_rewards", "group_ids"})

    def __init__(self, discounted: bool = False, scale: str = "group", eps: float = 1e-4):
        self.discounted = bool(discounted)
        self.scale = _check_scale(scale, "group_process")
        self.eps = float(eps)

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        valid = inputs.valid
        rewards = np.asarray(inputs.rewards, dtype=np.float64)
        inverse, n_groups, _ = group_index(inputs.group_ids)
        step_groups = np.broadcast_to(inverse[None, :], rewards.shape)
        mean, std, spread = grouped_mean_std(rewards[valid], step_groups[valid], n_groups)
        normalised = np.where(valid, rewards - mean[step_groups], 0.0)
        flat = spread[step_groups] == 0.0
        normalised[flat] = 0.0
        if self.scale == "group":
            normalised = normalised / (std[step_groups] + self.eps)
        elif self.scale == "batch":
            normalised = normalised / (normalised[valid].std() + self.eps)
        normalised[flat | ~valid] = 0.0
        if np.all(spread == 0.0):
            warn_once(
                self,
                "group_process_flat",
                "group_process: in every group all per-step rewards are equal (for instance CartPole's constant +1), "
                "so every advantage is zero and nothing is learned. Use an outcome estimator such as 'group_zscore', "
                "or 'group_step_baseline'.",
            )
        discount = inputs.gamma if self.discounted else 1.0
        return AdvantageOutputs(advantages=reward_to_go(normalised, discount, valid))


def _others_mean(values: np.ndarray, valid: np.ndarray, inverse: np.ndarray, n_groups: int) -> np.ndarray:
    """Per entry ``(t, i)``: the mean of ``values`` over the other members of column i's group alive at t, or the
    entry itself where no other member is alive (so that ``values - _others_mean(...)`` is zero there). ``values``
    is ``(T, B)`` or ``(T, B, F)``: ``F`` quantities at once, each as a ``(T, B)`` one."""
    trailing = (slice(None), slice(None)) + (None,) * (values.ndim - 2)
    alive_all = valid[trailing]
    sums = np.zeros((values.shape[0], n_groups, *values.shape[2:]))
    counts = np.zeros((values.shape[0], n_groups))
    for column in range(values.shape[1]):
        alive = valid[:, column]
        sums[:, inverse[column]] += np.where(alive_all[:, column], values[:, column], 0.0)
        counts[:, inverse[column]] += alive
    others = (counts[:, inverse] - 1.0)[trailing]
    return np.where(others > 0, (sums[:, inverse] - np.where(alive_all, values, 0.0)) / np.maximum(others, 1.0), values)


def _rounding(values: np.ndarray) -> float:
    """The size below which a spread of ``values`` (a standard deviation) is rounding, not a difference."""
    return 1e-12 * max(1.0, float(np.abs(values).max(initial=0.0)))


def _history_features(
    streams: list[np.ndarray], valid: np.ndarray, used: np.ndarray, inverse: np.ndarray, n_groups: int
) -> list[np.ndarray]:
    """``reward_history``'s features: per stream, each member's last reward and its moving average (decay 0.9) minus
    the same for the other members alive at the same step, zero outside ``used``."""
    features = []
    for stream in streams:
        stream = np.where(valid, np.asarray(stream, dtype=np.float64), 0.0)
        last = np.zeros_like(stream)
        last[1:] = stream[:-1]
        average = np.zeros_like(stream)
        for t in range(1, stream.shape[0]):
            average[t] = 0.9 * average[t - 1] + 0.1 * stream[t - 1]
        for feature in (last, average):
            features.append(np.where(used, feature - _others_mean(feature, valid, inverse, n_groups), 0.0))
    return features


def _state_features(
    observations: np.ndarray, valid: np.ndarray, used: np.ndarray, inverse: np.ndarray, n_groups: int
) -> list[np.ndarray]:
    """``state_baseline``'s features: each number of the observation and its square minus the same for the other
    members alive at the same step, zero outside ``used``."""
    # each number and its square, side by side: (T, B, 2 D)
    stacked = np.stack([observations, np.square(observations)], axis=3).reshape(*observations.shape[:2], -1)
    relative = np.where(used[:, :, None], stacked - _others_mean(stacked, valid, inverse, n_groups), 0.0)
    return list(np.moveaxis(relative, 2, 0))


def _subtract_history_fit(
    advantages: np.ndarray, features: list[np.ndarray], used: np.ndarray
) -> tuple[np.ndarray, float | None]:
    """``group_step_baseline(reward_history=True)``: subtract the least-squares fit of ``advantages`` on ``features``
    (:func:`_history_features`) over the entries ``used`` (real steps with an advantage) after the first step.

    :return: the advantages less the fit, and the fraction of their sum of squares the fit removed (``None`` when
        there are too few entries to fit)."""
    fitted = used.copy()
    fitted[0] = False
    if fitted.sum() <= len(features):
        return advantages, None
    design = np.stack([feature[fitted] for feature in features], axis=1)
    target = advantages[fitted]
    beta, *_ = np.linalg.lstsq(design, target, rcond=None)
    out = advantages.copy()
    out[fitted] -= design @ beta
    total = float(np.square(target).sum())
    explained = 1.0 - float(np.square(out[fitted]).sum()) / total if total > 0 else 0.0
    return out, explained


#: ``state_baseline``'s folds of trajectories: each trajectory's fit is made on the other folds' steps.
STATE_FOLDS = 4
#: ``state_baseline``'s ridge penalties per fitted step (features scaled to unit variance), tried on every batch.
STATE_RIDGES = (1e-3, 1e-2, 1e-1, 1.0)


def _subtract_cross_fit(
    advantages: np.ndarray, features: list[np.ndarray], used: np.ndarray
) -> tuple[np.ndarray, float | None]:
    """``group_step_baseline(state_baseline=True)``: subtract from each trajectory's advantages a ridge fit of them on
    ``features`` made on the other trajectories only (column ``c`` in fold ``c % STATE_FOLDS``; features scaled to
    unit variance over ``used``), so that a step's own return does not enter the fit subtracted from it. Of the
    penalties ``STATE_RIDGES`` (times the fitted steps) the one whose held-out fits leave the least sum of squares is
    used; where even that one leaves more than the advantages had, nothing is subtracted.

    :return: the advantages less the fits, and the fraction of their sum of squares over ``used`` that the fits
        removed (0 when nothing is subtracted; ``None`` when there is one trajectory or a fold has too few steps to
        fit, the advantages then returned as they are)."""
    n_columns = used.shape[1]
    if n_columns < 2:
        return advantages, None
    folds = np.broadcast_to((np.arange(n_columns) % STATE_FOLDS)[None, :], used.shape)[used]
    design = np.stack([feature[used] for feature in features], axis=1)
    scale = design.std(axis=0)
    varies = scale > _rounding(design)  # rounding is not a feature
    design = design[:, varies] / scale[varies]
    target = advantages[used]
    if design.shape[1] == 0:  # the states do not differ between members at any step: nothing to fit
        return advantages, 0.0
    fits = np.zeros((len(STATE_RIDGES), len(target)))
    for fold in np.unique(folds):
        train = folds != fold
        n_train = int(train.sum())
        if n_train <= design.shape[1]:
            return advantages, None
        eigenvalues, eigenvectors = np.linalg.eigh(design[train].T @ design[train])
        projected = eigenvectors.T @ (design[train].T @ target[train])
        for k, ridge in enumerate(STATE_RIDGES):
            beta = eigenvectors @ (projected / (eigenvalues + ridge * n_train))
            fits[k, ~train] = design[~train] @ beta
    residuals = np.square(target[None, :] - fits).sum(axis=1)
    total = float(np.square(target).sum())
    best = int(np.argmin(residuals))
    if total <= 0 or residuals[best] >= total:
        return advantages, 0.0
    out = advantages.copy()
    out[used] -= fits[best]
    return out, 1.0 - float(residuals[best]) / total


class GroupStepBaseline(AdvantageEstimator):
    """
    Per-step group baseline for long episodes. Members of a group start from one state, so at step index t
    their discounted rewards-to-go can be compared: ``A_t^i = G_t^i - mean_{j != i, j alive at t} G_t^j``.
    A member with no other member alive at t gets ``G_t^i`` minus the group's mean ``G_t`` over the members alive
    at t (that is, zero when it is alone). Advantages are then divided by their standard deviation over the
    batch (``scale="batch"``, default: per-group scaling was unstable in experiments), by the larger of that and
    ``floor`` times the standard deviation of every advantage computed so far (``scale="floored"``), or left as is
    (``"none"``).

    ``"floored"`` is for tasks where the whole batch can end up nearly tied: once every member of every group
    stays alive for the whole episode (Hopper-v5 standing still), the rewards-to-go differ by a little drift, and
    dividing by the batch's standard deviation blows that up to unit size. The running standard
    deviation (count-weighted over all advantages so far, like VecNormalize's statistics; part of the estimator's
    state, saved with the model) keeps such a batch's step as small as its advantages are; where the advantages grow
    over training, the batch's own standard deviation is the larger and ``"floored"`` acts as ``"batch"``. A
    ``floor`` below 1 lets a tied batch's advantages grow by up to ``1 / floor`` before the floor holds (what it
    measured on Hopper-v5 is in the docs' GRPO studies).

    With ``lam < 1`` the leave-one-out baseline ``b_t^i`` serves as a time-indexed value estimate, as a critic would
    in GAE: ``delta_t^i = r_t^i + gamma * b_{t+1}^i - b_t^i`` (``b = 0`` after the member's last step) and
    ``A_t^i = sum_k (gamma * lam)^k delta_{t+k}^i``. ``lam = 1`` telescopes to ``G_t^i - b_t^i`` above. While the
    same members are alive, ``delta`` is the member's reward minus the others' mean reward at the same step, so
    credit stays within about ``1 / (1 - gamma * lam)`` steps; a member that ends early gets the others' whole
    remaining return ``-b_t^i`` as one ``delta`` at its last step, spread back over those steps. Like GAE's
    lambda, this trades the full return's variance for the bias of a baseline that does not see the state: it blames
    a fall or credits a goal only on the steps right before it. Where all members of a group end at the same step,
    it is the plain baseline discounted by ``gamma * lam``. With ``reward_history`` or ``state_baseline`` (below) the
    value is ``b_t^i`` plus what their fit predicts of ``G_t^i - b_t^i``: a value that sees the state, fitted on the
    batch (cross-fitted for ``state_baseline``), in the same sum; ``lam = 1`` is then the fitted advantage below.

    One discount per reward function (GRPO's ``reward_gammas``): the rewards-to-go are the sum over the reward
    functions of each one's rewards-to-go under its own discount, ``G_t^i = sum_k sum_{s>=t} gamma_k^(s-t) r_{k,s}^i``,
    and the baseline is formed from them as above. A survival bonus can then look far ahead (a fall costs every step
    after it) while a speed reward is credited to the steps around it. Needs ``lam=1``.

    ``stream_scale="each"`` divides each reward function's advantage ``G_{k,t}^i - b_{k,t}^i`` by its own standard
    deviation over the batch before they are summed (and the sum scaled as above), so that each reward function has
    the same say in the update whatever its size. Summed as they are (``"joint"``, the default), the stream whose
    advantages vary most decides the update's direction: a survival bonus discounted over a thousand steps varies
    by hundreds where some members fall, a speed reward discounted over thirty by tens. This is the per-reward
    normalisation of multi-reward GRPO (GDPO, arXiv 2601.05242) over a batch's steps. A stream whose advantages are
    all zero (every member alive to the end of the window) adds nothing; a weight (GRPO's ``reward_weights``) keeps
    only its sign. Needs ``reward_gammas``. What it did on Walker2d-v5 and Hopper-v5 is in the long-episodes guide.

    ``reward_history=True`` subtracts, in addition, what each member's own rewards before step t predict of its
    advantage. By step t the members of a group are in different states, and ``G_t^i - b_t^i`` carries the difference
    of their states' values, which no action at t caused (a critic removes it). Rewards persist (a walker that is fast
    at t-1 is fast over the next steps), so part of that difference shows in the rewards already received. Per reward
    function, the member's last reward ``r_{t-1}^i`` and its moving average (decay 0.9) minus the same for the other
    members alive at t are the features ``x_t^i``; ``beta`` is the least-squares fit of the advantages on them over the
    batch, and ``A_t^i - beta . x_t^i`` the advantage. The features are fixed before the action at t, so subtracting
    them leaves the policy gradient's expectation unchanged (up to fitting ``beta`` on the same batch, O(features /
    steps)) and removes the variance they explain: the fraction removed is ``history_explained`` (GRPO's
    ``train/reward_history_explained``).

    ``state_baseline=True`` subtracts what each member's state at t predicts of its advantage: the features are every
    number of the observation the policy saw (normalised where the env is) and its square, minus the same for the
    other members alive at t; the fit is a ridge regression made, for each trajectory, on the trajectories of the
    other folds (``STATE_FOLDS`` folds by column, features scaled to unit variance), so that a step's own return is
    not in the fit subtracted from it. Of the penalties ``STATE_RIDGES`` the batch's held-out fits choose the best,
    and a batch whose best held-out fit leaves more variance than it found subtracts nothing. This is the state's part
    of ``G_t^i - b_t^i`` that a critic would remove, fitted afresh on each batch: no value function is kept or trained
    between updates.
    A state is fixed before the action taken in it, so the policy gradient keeps its expectation up to the fit's
    dependence on the other members' returns (a member's return is in the others' baselines, with weight
    ``1 / (n - 1)``). With ``reward_history`` too, both sets of features go into the one cross-fitted regression.
    The fraction of the advantages' sum of squares removed is ``state_explained`` (GRPO's
    ``train/state_baseline_explained``). Needs an algorithm that provides ``"observations"`` (GRPO).

    :param scale: ``"batch"`` (default), ``"floored"`` or ``"none"``.
    :param floor: with ``scale="floored"``, the floor as a fraction of the running standard deviation, in (0, 1]
        (default 1).
    :param lam: the GAE-style lambda in [0, 1] (default 1: the plain per-step baseline).
    :param eps: added to the standard deviation.
    :param reward_history: also subtract the part of the advantage that each member's own earlier rewards predict
        (above; default False).
    :param state_baseline: also subtract the part of the advantage that each member's state predicts (above; default
        False).
    :param stream_scale: with one discount per reward function, ``"joint"`` (default) sums their advantages as they
        are, ``"each"`` divides each by its own standard deviation over the batch first (above).
    """

    requires = frozenset({"step_rewards", "group_ids"})
    reward_history = False  # class defaults as well: estimators saved before the options load without them
    state_baseline = False
    stream_scale = "joint"

    def __init__(
        self,
        scale: str = "batch",
        lam: float = 1.0,
        eps: float = 1e-8,
        floor: float = 1.0,
        reward_history: bool = False,
        state_baseline: bool = False,
        stream_scale: str = "joint",
    ):
        if scale not in ("batch", "floored", "none"):
            raise EstimatorError(f"group_step_baseline: scale must be 'batch', 'floored' or 'none', got {scale!r}")
        if not 0.0 < floor <= 1.0:  # also refuses NaN
            raise EstimatorError(f"group_step_baseline: floor must be in (0, 1], got {floor!r}")
        if floor != 1.0 and scale != "floored":
            raise EstimatorError(f"group_step_baseline: floor={floor!r} needs scale='floored', got scale={scale!r}")
        if not 0.0 <= lam <= 1.0:  # also refuses NaN
            raise EstimatorError(f"group_step_baseline: lam must be in [0, 1], got {lam!r}")
        if not isinstance(reward_history, (bool, np.bool_)):
            raise EstimatorError(f"group_step_baseline: reward_history must be True or False, got {reward_history!r}")
        if not isinstance(state_baseline, (bool, np.bool_)):
            raise EstimatorError(f"group_step_baseline: state_baseline must be True or False, got {state_baseline!r}")
        if stream_scale not in ("joint", "each"):
            raise EstimatorError(f"group_step_baseline: stream_scale must be 'joint' or 'each', got {stream_scale!r}")
        if stream_scale == "each" and lam != 1.0:
            raise EstimatorError(f"group_step_baseline: stream_scale='each' needs lam=1, got lam={lam!r}")
        self.reward_history = bool(reward_history)
        self.state_baseline = bool(state_baseline)
        self.stream_scale = stream_scale
        if self.state_baseline:
            self.requires = type(self).requires | {"observations"}
        self.scale = scale
        self.lam = float(lam)
        self.eps = float(eps)
        self.floor = float(floor)
        # Running moments of the unscaled advantages (scale="floored"); epsilon=0: no prior, the first batch's own.
        self._running = RunningMeanStd(epsilon=0.0, shape=())

    @property
    def running_count(self) -> float:
        """Advantages folded into the running moments so far."""
        return float(self._running.count)

    @property
    def running_mean(self) -> float:
        """Running mean of the unscaled advantages."""
        return float(self._running.mean)

    @property
    def running_var(self) -> float:
        """Running variance of the unscaled advantages (count-weighted over every batch so far)."""
        return float(self._running.var)

    @property
    def history_explained(self) -> float | None:
        """With ``reward_history``: the fraction of the advantages' sum of squares the last batch's fit removed (GRPO
        logs it as ``train/reward_history_explained``); ``None`` before the first batch."""
        return getattr(self, "_history_explained", None)

    @property
    def state_explained(self) -> float | None:
        """With ``state_baseline``: the fraction of the advantages' sum of squares the last batch's cross-fitted
        regression removed (GRPO logs it as ``train/state_baseline_explained``); ``None`` before the first batch."""
        return getattr(self, "_state_explained", None)

    @property
    def accepts_reward_streams(self) -> bool:
        """One discount per reward function works with the plain baseline (``lam=1``) only."""
        return self.lam == 1.0

    @property
    def scales_reward_streams(self) -> bool:
        """Whether each reward function's advantage is scaled on its own (``stream_scale="each"``): the caller must
        then hand over one stream per reward function, and no stream that is not one (such as a KL penalty)."""
        return self.stream_scale == "each"

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        valid = inputs.valid
        rewards = np.where(valid, np.asarray(inputs.rewards, dtype=np.float64), 0.0)
        streams = inputs.extras.get(REWARD_STREAMS)
        inverse, n_groups, _ = group_index(inputs.group_ids)
        if streams is None:
            if self.scales_reward_streams:
                raise EstimatorError(
                    "group_step_baseline: stream_scale='each' scales each reward function's advantage on its own and "
                    "needs one discount per reward function (GRPO's reward_gammas); got a single reward"
                )
            returns_to_go = reward_to_go(rewards, inputs.gamma, valid)
        else:
            if not self.accepts_reward_streams:
                raise EstimatorError(
                    f"group_step_baseline: one discount per reward function (reward_gammas) needs lam=1, got lam={self.lam}"
                )
            returns_to_go = np.zeros_like(rewards)
            for stream, gamma in streams:
                if np.shape(stream) != rewards.shape:
                    raise EstimatorError(
                        f"group_step_baseline: a reward stream has shape {np.shape(stream)}, the rewards {rewards.shape}"
                    )
                stream_to_go = reward_to_go(np.where(valid, stream, 0.0), gamma, valid)
                if self.scales_reward_streams:
                    # the advantage is linear in the returns-to-go: scaling these scales the stream's advantage
                    own = (stream_to_go - _others_mean(stream_to_go, valid, inverse, n_groups))[valid]
                    spread = float(own.std()) if own.size else 0.0
                    if spread <= _rounding(stream_to_go[valid]):  # every advantage of this stream is zero
                        continue
                    stream_to_go = stream_to_go / spread
                returns_to_go += stream_to_go
        horizon = rewards.shape[0]
        # Per (t, group): the highest and lowest G_t over members alive at t.
        highest = np.full((horizon, n_groups), -np.inf)
        lowest = np.full((horizon, n_groups), np.inf)
        for column in range(rewards.shape[1]):
            g, alive = inverse[column], valid[:, column]
            highest[alive, g] = np.maximum(highest[alive, g], returns_to_go[alive, column])
            lowest[alive, g] = np.minimum(lowest[alive, g], returns_to_go[alive, column])
        baseline = _others_mean(returns_to_go, valid, inverse, n_groups)
        # Where every member alive at t has the same return-to-go the advantage is exactly zero (no rounding noise).
        flat = (highest == lowest)[:, inverse]
        used = valid & ~flat
        advantages = np.where(used, returns_to_go - baseline, 0.0)
        features = []
        if self.reward_history:
            histories = [rewards] if streams is None else [stream for stream, _ in streams]
            features += _history_features(histories, valid, used, inverse, n_groups)
        if self.state_baseline:
            if inputs.observations is None:
                raise EstimatorError("group_step_baseline: state_baseline=True needs the inputs' observations")
            features += _state_features(np.asarray(inputs.observations, dtype=np.float64), valid, used, inverse, n_groups)
            remainder, self._state_explained = _subtract_cross_fit(advantages, features, used)
        elif self.reward_history:
            remainder, self._history_explained = _subtract_history_fit(advantages, features, used)
        else:
            remainder = advantages
        if self.lam == 1.0:
            advantages = remainder
        else:
            # the value of member i at t: the others' mean return-to-go plus what the fits predict of the difference
            value = np.where(valid, baseline + (advantages - remainder), 0.0)
            following = np.zeros_like(value)
            following[:-1] = value[1:]  # zero past the last row and on padding (the member has ended)
            deltas = np.where(used, rewards + inputs.gamma * following - value, 0.0)
            advantages = np.where(~flat, reward_to_go(deltas, inputs.gamma * self.lam, valid), 0.0)
        if self.scale != "none" and valid.any():
            scale = advantages[valid].std()
            if self.scale == "floored":
                self._running.update(advantages[valid])
                scale = max(scale, self.floor * np.sqrt(self.running_var))
            advantages = advantages / (scale + self.eps)
        return AdvantageOutputs(advantages=np.where(valid, advantages, 0.0))


class GroupAuto(AdvantageEstimator):
    """
    GRPO's default: DeepSeekMath's split between outcome and process supervision, decided by the rewards of each batch.

    - Outcome supervision (every trajectory of the batch is rewarded on its last step only, every earlier per-step
      reward is exactly 0: a reward function that returns one float per trajectory, such as
      ``arithmetic_exact_match``, or an env that pays only at the end): ``group_zscore``,
      ``(R_i - mean_g) / (std_g + eps)`` on every step.
    - Otherwise (per-step rewards: SB3's identity envs, CartPole, Pendulum, MuJoCo): ``group_step_baseline``, each
      member's discounted reward-to-go minus the other members' at the same step, divided by the batch's standard
      deviation.

    Measured (table in the GRPO module docs, data in ``benchmarks/results/default_estimator.json``): ``group_zscore``
    falls short of SB3's identity tests (74 / 15 / 19 of the 90 they require) where ``group_step_baseline`` passes,
    while on ``sb3_grpo/Arithmetic-v0`` with a graded outcome (exact match + format + length penalty) the per-group
    scaling of ``group_zscore`` scored 0.72 against 0.51. Both halves are the built-in estimators unchanged; with GRPO's
    ``reward_gammas`` (one discount per reward function) the batch always goes to ``group_step_baseline``.

    :param outcome_kwargs: options of the ``group_zscore`` half (``scale``, ``eps``).
    :param step_kwargs: options of the ``group_step_baseline`` half (``scale``, ``lam``, ``eps``, ``floor``,
        ``reward_history``, ``state_baseline``, ``stream_scale``).
    """

    requires = frozenset({"step_rewards", "outcome_rewards", "group_ids"})

    def __init__(self, outcome_kwargs: dict | None = None, step_kwargs: dict | None = None):
        self.outcome_kwargs = dict(outcome_kwargs or {})
        self.step_kwargs = dict(step_kwargs or {})
        self._outcome = GroupZScore(**self.outcome_kwargs)
        self._step = GroupStepBaseline(**self.step_kwargs)
        #: which half computed the last batch: ``"outcome"`` or ``"step"`` (``None`` before the first)
        self.last_mode: str | None = None

    @property
    def accepts_reward_streams(self) -> bool:
        """One discount per reward function: as ``group_step_baseline``, which then computes every batch."""
        return self._step.accepts_reward_streams

    @property
    def scales_reward_streams(self) -> bool:
        """As ``group_step_baseline``'s (``step_kwargs``' ``stream_scale``)."""
        return self._step.scales_reward_streams

    @staticmethod
    def outcome_only(inputs: AdvantageInputs) -> bool:
        """Whether every trajectory's per-step rewards are 0 on all its steps but the last."""
        valid = inputs.valid
        if valid.size == 0:
            return True
        columns = np.flatnonzero(valid.any(axis=0))
        last_row = valid.shape[0] - 1 - np.argmax(valid[::-1, columns], axis=0)  # each column's last real step
        earlier = valid.copy()
        earlier[last_row, columns] = False
        return bool(np.all(np.asarray(inputs.rewards)[earlier] == 0.0))

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        if inputs.extras.get(REWARD_STREAMS) is None and self.outcome_only(inputs):
            self.last_mode = "outcome"
            return self._outcome.compute(inputs)
        self.last_mode = "step"
        return self._step.compute(inputs)


BUILTIN_ESTIMATORS: dict[str, type] = {
    "gae": GAE,
    "n_step": NStep,
    "td": TD,
    "monte_carlo": MonteCarlo,
    "group_zscore": GroupZScore,
    "group_mean": GroupMean,
    "leave_one_out": LeaveOneOut,
    "group_process": GroupProcess,
    "reinforce_baseline": ReinforceBaseline,
    "group_step_baseline": GroupStepBaseline,
    "group_auto": GroupAuto,
    **VERL_ESTIMATORS,
}


@hookimpl
def register_advantage_estimators(register) -> None:
    register_each(register, BUILTIN_ESTIMATORS)
