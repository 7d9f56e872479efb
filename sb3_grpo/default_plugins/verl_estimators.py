"""
The advantage estimators of verl's registry (``@register_adv_est`` in ``verl/trainer/ppo/core_algos.py``) that the
other built-ins do not already cover, adapted to episodes of steps: a step plays verl's token, an episode its
response, the episode's outcome reward verl's sequence score (the sum of a response's token rewards), and a group
the episodes that start from one state (verl: the responses to one prompt). Per-step rewards play verl's
``token_level_rewards``.

- ``reinforce_plus_plus``: the discounted reward-to-go of every step, whitened over every step of the batch.
- ``reinforce_plus_plus_baseline``: the outcome minus its group's mean, on every step, whitened over every step.
- ``grpo_passk``: only the best member of each group gets an advantage, ``r_max - r_second``.
- ``optimal_token_baseline``: the reward-to-go minus a per-step group baseline weighted by each member's accumulated
  squared score norm (categorical policies).

The others of verl's registry: ``rloo`` is ``leave_one_out``; ``grpo`` is ``group_zscore`` up to the standard
deviation (the group's population one here, the sample one in verl), ``eps`` and a group of one (zero here, its
outcome in verl); ``gae`` is ``gae``. ``remax`` needs the return of a greedy episode from each group's start, which
the group collector does not run (see the built-ins page).

Sources:
- verl, ``verl/trainer/ppo/core_algos.py`` and ``verl/utils/torch_functional.py::masked_whiten``,
  https://github.com/volcengine/verl
- REINFORCE++: Hu 2025, https://arxiv.org/abs/2501.03262
- Pass@k advantage: verl's ``compute_grpo_passk_outcome_advantage``, after https://arxiv.org/abs/2503.19595
- Optimal token baseline: verl's ``docs/algo/otb.md`` and https://richardli.xyz/optimal-token-baseline
"""

from __future__ import annotations

import numpy as np

from sb3_grpo.common.advantages import (
    AdvantageEstimator,
    AdvantageInputs,
    AdvantageOutputs,
    EstimatorError,
    group_index,
    grouped_mean_std,
    reward_to_go,
)

__all__ = [
    "VERL_ESTIMATORS",
    "GroupPassK",
    "OptimalTokenBaseline",
    "ReinforcePlusPlus",
    "ReinforcePlusPlusBaseline",
    "whiten",
]

#: verl's ``masked_whiten`` adds this to the variance before the square root.
WHITEN_EPS = 1e-8


def whiten(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``(x - mean) / sqrt(var + 1e-8)`` with the mean and the sample (Bessel-corrected) variance over the real steps,
    every step weighing the same; zero on padding, and exactly zero everywhere when all real steps hold one value
    (fewer than two real steps included).

    :param values: ``(T, B)`` per-step values.
    :param valid: ``(T, B)`` bool, True on real steps.
    :return: the whitened values, float64.

    Reference: verl, ``verl/utils/torch_functional.py::masked_whiten`` (``shift_mean=True``); verl adds ``1e-8`` to
    the count that divides the masked mean, a relative difference below ``1e-8``.
    """
    values = np.asarray(values, dtype=np.float64)
    real = values[valid]
    if real.size < 2 or np.ptp(real) == 0.0:
        return np.zeros_like(values)
    return np.where(valid, (values - real.mean()) / np.sqrt(real.var(ddof=1) + WHITEN_EPS), 0.0)


def _flat_groups(outcomes: np.ndarray, inverse: np.ndarray, n_groups: int) -> np.ndarray:
    """``(B,)`` True for the members of a group whose outcomes are all equal."""
    _, _, spread = grouped_mean_std(outcomes, inverse, n_groups)
    return spread[inverse] == 0.0


class ReinforcePlusPlus(AdvantageEstimator):
    """
    REINFORCE++ (verl's ``reinforce_plus_plus``): the discounted reward-to-go of every step,
    ``G_t = r_t + gamma * G_{t+1}`` with the algorithm's ``gamma``, whitened over every real step of the batch,
    ``A_t = (G_t - mean(G)) / sqrt(var(G) + 1e-8)`` (mean and sample variance over all steps of all episodes: a long
    episode weighs more). No group and no critic: the batch's mean is the baseline. A batch whose ``G_t`` are all equal
    gets exactly zero. Needs whole episodes (``outcome_rewards``, the trajectory layout): a critic algorithm's rollout
    cuts episodes, and the reward-to-go would stop short.

    Source: Hu 2025, https://arxiv.org/abs/2501.03262; verl's ``compute_reinforce_plus_plus_outcome_advantage``.
    """

    requires = frozenset({"step_rewards", "outcome_rewards"})

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        valid = inputs.valid
        returns = reward_to_go(np.where(valid, inputs.rewards, 0.0), inputs.gamma, valid)
        return AdvantageOutputs(advantages=whiten(returns, valid))


class ReinforcePlusPlusBaseline(AdvantageEstimator):
    """
    REINFORCE++ with a group baseline (verl's ``reinforce_plus_plus_baseline``): each episode's outcome minus its
    group's mean outcome, ``R_i - mean_g``, on every step of the episode, then whitened over every real step of the
    batch as in ``reinforce_plus_plus``: ``A = (c - mean(c)) / sqrt(var(c) + 1e-8)``, the mean and sample variance
    taken over steps (a long episode weighs more).

    As in verl: the member of a group of one keeps its outcome (its baseline is 0, so with ``group_size=1`` this is
    the outcome whitened over the batch), and the whitening moves every step by the batch's mean, so the members of a
    group whose outcomes are all equal get ``-mean(c) / std(c)``, which is not zero unless the batch is balanced. A
    batch whose centred outcomes are all equal gets exactly zero.

    Source: Hu 2025, https://arxiv.org/abs/2501.03262; verl's
    ``compute_reinforce_plus_plus_baseline_outcome_advantage``.
    """

    requires = frozenset({"outcome_rewards", "group_ids"})

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        outcomes = np.asarray(inputs.outcome_rewards, dtype=np.float64)
        inverse, n_groups, counts = group_index(inputs.group_ids)
        mean, _, _ = grouped_mean_std(outcomes, inverse, n_groups)
        centred = np.where(counts[inverse] > 1, outcomes - mean[inverse], outcomes)
        centred[_flat_groups(outcomes, inverse, n_groups) & (counts[inverse] > 1)] = 0.0  # exact, no rounding noise
        return AdvantageOutputs(advantages=whiten(inputs.broadcast(centred), inputs.valid))


class GroupPassK(AdvantageEstimator):
    """
    Pass@k advantage (verl's ``grpo_passk``): in each group only the best member learns, with the advantage
    ``r_max - r_second`` (its outcome minus the second-highest outcome of its group) on all its steps; every other
    member gets zero. With ``scale="group"`` (default, verl's ``norm_adv_by_std_in_grpo=True``) that is divided by
    ``std_g + eps``, the group's sample (Bessel-corrected) standard deviation as verl takes it. A tie for the best
    gives zero to the whole group, as does a group whose outcomes are all equal. A group of one has no second best:
    refused, as verl refuses it.

    :param scale: ``"group"`` (default) or ``"none"``.
    :param eps: added to the standard deviation (verl's ``epsilon``).

    Source: verl's ``compute_grpo_passk_outcome_advantage``, after https://arxiv.org/abs/2503.19595.
    """

    requires = frozenset({"outcome_rewards", "group_ids"})

    def __init__(self, scale: str = "group", eps: float = 1e-6):
        if scale not in ("group", "none"):
            raise EstimatorError(f"grpo_passk: scale must be 'group' or 'none', got {scale!r}")
        if not eps > 0:  # also refuses NaN
            raise EstimatorError(f"grpo_passk: eps must be positive, got {eps!r}")
        self.scale = scale
        self.eps = float(eps)

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        outcomes = np.asarray(inputs.outcome_rewards, dtype=np.float64)
        group_ids = np.asarray(inputs.group_ids)
        inverse, n_groups, counts = group_index(group_ids)
        if (counts < 2).any():
            lone = group_ids[np.flatnonzero(counts[inverse] < 2)[0]]
            raise EstimatorError(
                f"grpo_passk needs at least 2 members per group (the best against the second best); group {lone} has "
                "1. Use group_size >= 2."
            )
        advantages = np.zeros_like(outcomes)
        for group in range(n_groups):
            members = np.flatnonzero(inverse == group)
            order = members[np.argsort(-outcomes[members], kind="stable")]
            advantage = outcomes[order[0]] - outcomes[order[1]]
            if self.scale == "group":
                advantage = advantage / (outcomes[members].std(ddof=1) + self.eps)
            advantages[order[0]] = advantage
        return AdvantageOutputs(advantages=inputs.broadcast(advantages))


class OptimalTokenBaseline(AdvantageEstimator):
    """
    Optimal token baseline (verl's ``optimal_token_baseline``): each step's reward-to-go minus a per-step group
    baseline that weighs each member by the squared score norm it has accumulated so far,

    ``A_t^i = G_t^i - B_t``, ``B_t = sum_j G_t^j W_t^j / (sum_j W_t^j + eps)``, ``W_t^j = sum_{s <= t} w_s^j``,
    ``w_s = 1 - 2 pi(a_s | s_s) + sum_a pi(a | s_s)^2``,

    the sums over the members of the group still running at step ``t`` (the member itself included), ``G_t`` the
    undiscounted reward-to-go of the per-step rewards (discounted with the algorithm's ``gamma`` when
    ``discounted=True``) and ``w_s`` the squared norm of the gradient of ``log pi(a_s | s_s)`` with respect to the
    logits of the categorical policy that acted: the "realized energy" of the member's path, so members whose
    actions were uncertain weigh more. Needs those score norms (``score_norms``): GRPO computes them for a Discrete
    action space and refuses this estimator for any other. A member of a group of one keeps its reward-to-go
    (baseline 0). Where every member running at step ``t`` has the same ``G_t`` (a member running alone included),
    the advantage is exactly zero (verl's is ``G_t * eps / (sum_j W_t^j + eps)``).

    verl's rollout importance weights (a correction between an inference engine and the trained model) have no
    counterpart here: the policy that acts is the one that is trained.

    :param discounted: discount the reward-to-go with the algorithm's ``gamma`` (verl does not).
    :param handle_zero_tail: where one member of a group runs longer than all the others, its steps past the
        second-longest member's end get baseline 0, so they keep their reward-to-go (as verl's option).
    :param eps: added to the sum of weights (verl's ``epsilon``).

    Source: verl's ``compute_optimal_token_baseline_advantage`` and ``docs/algo/otb.md``;
    https://richardli.xyz/optimal-token-baseline.
    """

    requires = frozenset({"step_rewards", "group_ids", "score_norms"})

    def __init__(self, discounted: bool = False, handle_zero_tail: bool = False, eps: float = 1e-8):
        if not eps > 0:  # also refuses NaN
            raise EstimatorError(f"optimal_token_baseline: eps must be positive, got {eps!r}")
        self.discounted = bool(discounted)
        self.handle_zero_tail = bool(handle_zero_tail)
        self.eps = float(eps)

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        valid = inputs.valid
        gamma = inputs.gamma if self.discounted else 1.0
        returns = reward_to_go(np.where(valid, inputs.rewards, 0.0), gamma, valid)
        weights = np.cumsum(np.where(valid, np.asarray(inputs.score_norms, dtype=np.float64), 0.0), axis=0)
        weights = np.where(valid, weights, 0.0)
        inverse, n_groups, counts = group_index(inputs.group_ids)
        member_of = np.zeros((len(inverse), n_groups))
        member_of[np.arange(len(inverse)), inverse] = 1.0
        numerator = ((returns * weights) @ member_of)[:, inverse]
        denominator = (weights @ member_of)[:, inverse]
        baseline = numerator / (denominator + self.eps)
        lone = counts[inverse] == 1
        baseline[:, lone] = 0.0
        # every member running at t has the same G_t: exactly zero (the weighted mean would miss G_t by eps)
        highest = np.full((returns.shape[0], n_groups), -np.inf)
        lowest = np.full((returns.shape[0], n_groups), np.inf)
        for column, group in enumerate(inverse):
            alive = valid[:, column]
            highest[alive, group] = np.maximum(highest[alive, group], returns[alive, column])
            lowest[alive, group] = np.minimum(lowest[alive, group], returns[alive, column])
        flat = (highest == lowest)[:, inverse] & ~lone[None, :]
        if self.handle_zero_tail:
            lengths = inputs.lengths
            for group in np.flatnonzero(counts > 1):
                members = np.flatnonzero(inverse == group)
                longest, second = np.sort(lengths[members])[-1], np.sort(lengths[members])[-2]
                if longest > second:
                    column = members[np.argmax(lengths[members])]
                    baseline[second:, column] = 0.0
                    flat[second:, column] = False
        advantages = np.where(valid & ~flat, returns - baseline, 0.0)
        return AdvantageOutputs(advantages=advantages)


#: The estimators of this module by registered name (registered with the other built-ins).
VERL_ESTIMATORS: dict[str, type] = {
    "reinforce_plus_plus": ReinforcePlusPlus,
    "reinforce_plus_plus_baseline": ReinforcePlusPlusBaseline,
    "grpo_passk": GroupPassK,
    "optimal_token_baseline": OptimalTokenBaseline,
}
