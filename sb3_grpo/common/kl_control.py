"""
The KL penalty to a reference policy beyond a fixed term of the loss: the penalty in the reward
(:func:`penalize_rewards`, verl's ``use_kl_in_reward``) and the adaptive coefficient (:func:`adapt_kl_coef`, verl's
``AdaptiveKLController``). The reference policy itself, and its moving update, live in
:mod:`sb3_grpo.common.reference`.

In the loss (GRPO's default), every step's loss gets ``beta * kl_t`` with the gradient of the ``kl_estimator``
estimate of ``KL(pi_theta || pi_ref)`` at the current policy. In the reward, the penalty is measured once per rollout,
without gradient, between the behaviour policy (the one that acted) and the reference, and every step's reward is
reduced by ``beta * kl_t`` before the advantages are computed: the policy then learns to stay near the reference the
way it learns anything else, through the advantages (Ziegler et al. 2019, InstructGPT; verl's ``apply_kl_penalty``
in ``verl/trainer/ppo/ray_trainer.py``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import replace
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

from sb3_grpo.common.groups.buffers import GroupRolloutBuffer
from sb3_grpo.common.groups.trajectories import ScoredRollout
from sb3_grpo.common.kl import kl_estimate

__all__ = ["adapt_kl_coef", "kl_argument_problem", "next_beta", "penalize_rewards", "reference_log_probs"]


def reference_log_probs(
    ref_policy: Any, scored: ScoredRollout, observation_space: spaces.Space, action_space: spaces.Space, device: Any
) -> np.ndarray:
    """``(N,)`` float32: the log-probability under ``ref_policy`` of every step's action of ``scored`` (in its order:
    trajectory by trajectory), computed as the training batch computes it (:meth:`GroupRolloutBuffer.log_prob_under`)."""
    buffer = GroupRolloutBuffer(observation_space, action_space, device)
    steps = len(scored.log_prob)
    trajectory = np.repeat(np.arange(len(scored.counts)), scored.counts)
    buffer.fill(scored.observations, scored.actions, scored.log_prob, np.zeros(steps), np.zeros(steps), trajectory)
    return buffer.log_prob_under(ref_policy)


def penalize_rewards(
    scored: ScoredRollout, ref_log_prob: np.ndarray, beta: float, estimator: str
) -> tuple[ScoredRollout, float]:
    """Subtract ``beta`` times the KL to the reference from the rewards of ``scored`` (verl's ``apply_kl_penalty``).

    ``kl_t`` is the ``estimator`` estimate (:func:`~sb3_grpo.common.kl.kl_estimate`; ``"k3+"`` has k3's value) of
    ``KL(pi_old || pi_ref)`` from ``log pi_ref(a_t) - log pi_old(a_t)`` at each step, with ``pi_old`` the behaviour
    policy. verl subtracts it from each token's reward; here a step plays the token:

    - where the rewards come at every step (a reward function that returns per-step rewards, an env's own reward),
      each step's reward becomes ``r_t - beta * kl_t``;
    - where every trajectory is rewarded on its last step only (reward functions that return one outcome per
      trajectory), the trajectory's summed penalty ``beta * sum_t kl_t`` is subtracted from that last reward, i.e.
      from the outcome. The outcome estimators (``group_zscore``, ``rloo``, ...) read the outcome only, so they see
      exactly what verl's GRPO sees (it sums the token rewards into one score), and the batch stays rewarded on its
      last steps, so ``group_auto`` keeps choosing the outcome estimator it would choose without the penalty.

    Either way each trajectory's outcome (its score) drops by ``beta * sum_t kl_t``, and with several reward functions
    the penalty is one more reward stream (for ``reward_gammas``: the caller gives it the discount ``gamma``).

    :param scored: the scored rollout.
    :param ref_log_prob: ``(N,)`` the reference's log-probabilities of the steps' actions (:func:`reference_log_probs`).
    :param beta: the penalty coefficient.
    :param estimator: the KL estimator (``"k1"``, ``"k2"``, ``"k3"``, ``"k3+"``).
    :return: the penalised rollout (a copy: ``scored`` is left as it is) and the measured KL: the mean over the
        trajectories of each trajectory's mean ``kl_t`` (verl's ``actor/reward_kl_penalty``, the KL its controller
        reads).
    """
    log_ratio = np.asarray(ref_log_prob, dtype=np.float64) - np.asarray(scored.log_prob, dtype=np.float64)
    kl = kl_estimate(th.from_numpy(log_ratio), estimator).detach().numpy()
    per_trajectory = scored.per_trajectory(kl)
    outcome_only = all(not np.any(rewards[:-1]) for rewards in scored.step_rewards)
    penalties = []
    for steps in per_trajectory:
        if outcome_only:
            at_end = np.zeros_like(steps)
            at_end[-1] = steps.sum()
            steps = at_end
        penalties.append(beta * steps)
    step_rewards = [rewards - penalty for rewards, penalty in zip(scored.step_rewards, penalties, strict=True)]
    sums = np.array([steps.sum() for steps in per_trajectory], dtype=np.float64)
    penalized = replace(
        scored,
        outcomes=scored.outcomes - beta * sums,
        step_rewards=step_rewards,
        streams=[*scored.streams, [-penalty for penalty in penalties]],
    )
    measured = float(np.mean([steps.mean() for steps in per_trajectory])) if per_trajectory else 0.0
    return penalized, measured


def adapt_kl_coef(kl_coef: float, measured_kl: float, target_kl: float, n_steps: float, horizon: float) -> float:
    """The proportional rule of an adaptive KL coefficient, after one update (Ziegler et al. 2019, "Fine-Tuning
    Language Models from Human Preferences", section 2.2; verl's ``AdaptiveKLController.update`` in
    ``verl/trainer/ppo/core_algos.py``):

        ``e = clip(measured_kl / target_kl - 1, -0.2, 0.2)``, ``kl_coef * (1 + e * n_steps / horizon)``.

    Per update the coefficient moves by at most a factor ``1 +- 0.2 * n_steps / horizon``. GRPO's ``kl_target`` and
    AdaptiveKLPPO's ``kl_adaptation="proportional"`` both use it.

    :param kl_coef: the coefficient of the update just made.
    :param measured_kl: the KL that update measured.
    :param target_kl: the KL the coefficient steers toward (> 0).
    :param n_steps: the samples the measurement covers (verl: the sequences of the batch).
    :param horizon: the controller's horizon in the same unit (> 0).
    """
    error = min(max(measured_kl / target_kl - 1.0, -0.2), 0.2)
    return kl_coef * (1.0 + error * n_steps / horizon)


def next_beta(algorithm: str, beta: float, measured_kl: float, kl_target: float, n_trajectories: int, horizon: float) -> float:
    """GRPO's ``beta`` for the next update with ``kl_target`` (:func:`adapt_kl_coef`, ``n_steps`` the trajectories of
    the batch, as verl counts sequences). A measurement that is not finite leaves ``beta`` unchanged.

    :param algorithm: the algorithm's name, which starts the message of an error.
    :raises ValueError: when one update would move ``beta`` to 0 or below (``n_trajectories >= 5 * horizon``), naming
        the fix.
    """
    if not math.isfinite(measured_kl):
        return beta
    new = adapt_kl_coef(beta, measured_kl, kl_target, n_trajectories, horizon)
    if not new > 0:
        raise ValueError(
            f"{algorithm}: kl_target would move beta from {beta!r} to {new!r}: one update of {n_trajectories} trajectories "
            f"moves it by up to a factor 1 +- 0.2 * {n_trajectories} / kl_horizon, with kl_horizon={horizon!r}. Raise "
            f"kl_horizon above {0.2 * n_trajectories} (about 10 times the trajectories of one update, or more)."
        )
    return new


def _positive(value: Any) -> bool:
    """A finite real number > 0 (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value) and float(value) > 0


def kl_argument_problem(beta: float, kl_in_reward: Any, kl_target: Any, kl_horizon: Any) -> str | None:
    """What is wrong with GRPO's ``kl_in_reward``, ``kl_target`` and ``kl_horizon`` (a message naming the fix), or
    ``None``."""
    if not isinstance(kl_in_reward, (bool, np.bool_)):
        return f"kl_in_reward must be True (the KL penalty in the reward) or False (in the loss), got {kl_in_reward!r}"
    if kl_target is not None and not _positive(kl_target):
        return f"kl_target must be a finite number > 0 (the KL beta steers toward) or None (a fixed beta), got {kl_target!r}"
    if kl_target is not None and not beta > 0:
        return (
            f"kl_target adapts beta by a factor per update, which cannot move beta={beta!r}: give the initial beta (> 0, "
            "e.g. beta=0.04) or drop kl_target"
        )
    if not _positive(kl_horizon):
        return f"kl_horizon must be a finite number > 0 (in trajectories; verl's horizon, 10000), got {kl_horizon!r}"
    return None
