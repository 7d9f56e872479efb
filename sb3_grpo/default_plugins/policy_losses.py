"""
Built-in policy losses, registered through the same hook as third-party ones (``register_policy_losses``).

Every loss is written per step (a step plays the part of a token, a trajectory that of a sequence), with
``r_t = pi_theta(a_t|s_t) / pi_old(a_t|s_t)`` the probability ratio, ``A_t`` the advantage, ``eps_low`` /
``eps_high`` GRPO's ``clip_range`` / ``clip_range_high`` and ``sg`` the stop-gradient. GRPO aggregates the per-step
losses with the weights of ``loss_type`` and adds the KL penalty and the entropy bonus (see
:mod:`sb3_grpo.common.policy_losses`).

- ``clip`` (default): PPO's clipped surrogate, with verl's dual clip (``clip_ratio_c``) and INTELLECT-2's upper clip of
  the unclipped term (TRL's ``delta``).
- ``gspo``: the clipped surrogate on one ratio per trajectory, ``exp(mean_t log r_t)`` (GSPO).
- ``cispo``: the clipped importance weight, stopped, times ``A log pi`` (MiniMax-M1).
- ``sapo``: a sigmoid gate of the ratio instead of the hard clip (SAPO).
- ``gpg``: plain policy gradient, ``-A log pi``, no ratio (GPG).
- ``clip_cov``, ``kl_cov``: the covariance-based losses of "The Entropy Mechanism of RL for Reasoning LMs".
- ``geo_mean``: the geometric mean of the per-step ratios of a trajectory, clipped in log space (GMPO).

Sources (files read at TRL's main of 2026-07 and verl's main of 2026-01):

- TRL ``trl/trainer/grpo_trainer.py`` (``GRPOTrainer._compute_loss``) and ``trl/trainer/grpo_config.py``;
- verl ``verl/trainer/ppo/core_algos.py`` (``compute_policy_loss_*``, registered with ``@register_policy_loss``) and
  ``verl/workers/config/actor.py`` (``ActorConfig``, ``PolicyLossConfig``: the defaults).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import torch as th

from sb3_grpo.common.policy_losses import PolicyLoss, PolicyLossInputs, PolicyLossOutputs
from sb3_grpo.default_plugins import register_each
from sb3_grpo.hookspecs import hookimpl

__all__ = ["BUILTIN_POLICY_LOSSES", "CISPO", "GPG", "GSPO", "SAPO", "ClipCov", "ClippedSurrogate", "GeoMean", "KLCov"]


def _option(loss: str, name: str, value: Any, accepts: Callable[[float], bool], wanted: str, optional: bool = False) -> Any:
    """``value`` as a float (or ``None`` where ``optional``), after checking it; a ``ValueError`` naming the loss."""
    if optional and value is None:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and accepts(float(value))
    if not ok:
        raise ValueError(f"policy loss {loss!r}: {name} must be {wanted}{' or None' if optional else ''}, got {value!r}")
    return float(value)


def _fraction(mask: th.Tensor) -> float:
    return float(mask.float().mean()) if mask.numel() else 0.0


# -------------------------------------------------------------------------
# Ratio losses with a hard clip
# -------------------------------------------------------------------------


class ClippedSurrogate(PolicyLoss):
    """
    ``clip``: PPO's clipped surrogate (GRPO's loss, DeepSeekMath; DAPO's clip-higher through ``clip_range_high``)::

        loss_t = -min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t)

    With ``delta`` (INTELLECT-2's two-sided clip, TRL's ``GRPOConfig.delta``), the unclipped term's ratio is capped:
    ``r_t A_t`` becomes ``min(r_t, delta) A_t``, which bounds the loss of a step with a negative advantage whose ratio
    has grown large (TRL recommends ``delta > 1 + eps_high``).

    With ``clip_ratio_c`` (dual-clip PPO, Ye et al. 2020, verl's ``clip_ratio_c``), the loss of a step with a negative
    advantage is bounded by ``-c A_t``: ``loss_t = min(loss_t, -c A_t)`` where ``A_t < 0`` (its gradient is cut where
    ``r_t > c``).

    Sources: TRL ``grpo_trainer.py`` (``loss_type`` ``"grpo"``/``"bnpo"``/``"dr_grpo"``/``"dapo"``, ``delta``);
    verl ``core_algos.py`` ``compute_policy_loss_vanilla`` (``"vanilla"``, dual clip; verl's default ``clip_ratio_c``
    is 3, here ``None``: off). Papers: PPO (arXiv:1707.06347), DeepSeekMath (arXiv:2402.03300), DAPO
    (arXiv:2503.14476), dual clip (arXiv:1912.09729), INTELLECT-2 (arXiv:2505.07291).

    :param clip_ratio_c: the dual clip's bound ``c > 1`` (``None``: no dual clip). Logs ``train/dual_clip_fraction``,
        the share of steps where it bounds the loss.
    :param delta: the cap ``delta > 1`` of the unclipped ratio (``None``: none). Logs ``train/delta_clip_fraction``,
        the share of steps with a negative advantage whose ratio exceeds it.
    """

    _name = "clip"

    def __init__(self, clip_ratio_c: float | None = None, delta: float | None = None):
        self.clip_ratio_c = _option(self._name, "clip_ratio_c", clip_ratio_c, lambda v: v > 1, "a number > 1", optional=True)
        self.delta = _option(self._name, "delta", delta, lambda v: v > 1, "a number > 1", optional=True)

    def ratio(self, inputs: PolicyLossInputs) -> th.Tensor:
        """The probability ratio of each step."""
        return th.exp(inputs.log_prob - inputs.old_log_prob)

    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        ratio = self.ratio(inputs)
        advantages = inputs.advantages
        clipped = th.clamp(ratio, 1.0 - inputs.clip_range_low, 1.0 + inputs.clip_range_high)
        unclipped = ratio if self.delta is None else th.clamp(ratio, max=self.delta)
        surrogate = th.min(advantages * unclipped, advantages * clipped)
        per_step = -surrogate
        stats: dict[str, float] = {}
        if self.delta is not None:
            stats["delta_clip_fraction"] = _fraction((ratio > self.delta) & (advantages < 0))
        if self.clip_ratio_c is not None:
            bound = -advantages * self.clip_ratio_c
            negative = advantages < 0
            stats["dual_clip_fraction"] = _fraction((per_step > bound) & negative)
            per_step = th.where(negative, th.min(bound, per_step), per_step)
        return PolicyLossOutputs(per_step=per_step, ratio=ratio, stats=stats)


class GSPO(ClippedSurrogate):
    """
    ``gspo``: Group Sequence Policy Optimization, the clipped surrogate on one ratio per trajectory::

        s_i = exp(mean_{t in i} log r_t),   loss_t = -min(s_i A_t, clip(s_i, 1 - eps_low, 1 + eps_high) A_t)

    for every step ``t`` of trajectory ``i``; the gradient flows through the mean (GSPO's sequence objective). Minibatches
    keep whole trajectories. With an advantage that is the same on every step of a trajectory (``group_zscore``), its
    gradient is GSPO-token's (verl's implementation, ``s_i`` stopped times ``pi / sg(pi)`` per token); with per-step
    advantages (``group_step_baseline``) it is GSPO's. GSPO's clip ranges are small (the paper: 3e-4 and 4e-4),
    as a trajectory ratio is a geometric mean. ``clip_ratio_c`` and ``delta`` act as in ``clip``, on ``s_i``.

    Was ``importance_sampling_level="trajectory"`` (TRL's ``importance_sampling_level="sequence"``), which still
    selects it, with the same numbers.

    Sources: TRL ``grpo_trainer.py`` (``importance_sampling_level="sequence"``); verl ``core_algos.py``
    ``compute_policy_loss_gspo``. Paper: GSPO (arXiv:2507.18071).
    """

    _name = "gspo"
    by_trajectory = True

    def ratio(self, inputs: PolicyLossInputs) -> th.Tensor:
        return th.exp(inputs.trajectory_means(inputs.log_prob - inputs.old_log_prob))[inputs.trajectory]


class CISPO(PolicyLoss):
    """
    ``cispo``: Clipped IS-weight Policy Optimization, a policy gradient weighted by the clipped, stopped ratio::

        loss_t = -sg(min(r_t, 1 + eps_high)) A_t log pi_theta(a_t|s_t)

    No step loses its gradient (the clip acts on the weight, not on the objective). TRL caps the weight at its
    ``epsilon_high`` itself (``clamp(coef_1, max=epsilon_high)``, recommended 5.0 after ScaleRL): here the cap is
    ``1 + clip_range_high`` (so ``clip_range_high=4.0`` is TRL's 5.0), MiniMax-M1's ``1 + eps_high^IS``. verl clips
    from below too, ``clip(r_t, 1 - eps_low, 1 + eps_high)``: ``lower_clip=True``.

    Sources: TRL ``grpo_trainer.py`` (``loss_type="cispo"``); verl ``core_algos.py`` ``compute_policy_loss_cispo``.
    Papers: MiniMax-M1 (arXiv:2506.13585), ScaleRL (arXiv:2510.13786).

    :param lower_clip: also clip the weight from below at ``1 - eps_low`` (verl's form).

    Logs ``train/cispo_clip_fraction``, the share of steps whose weight was clipped.
    """

    def __init__(self, lower_clip: bool = False):
        if not isinstance(lower_clip, bool):
            raise ValueError(f"policy loss 'cispo': lower_clip must be True or False, got {lower_clip!r}")
        self.lower_clip = lower_clip

    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        ratio = th.exp(inputs.log_prob - inputs.old_log_prob)
        low = 1.0 - inputs.clip_range_low if self.lower_clip else None
        weight = th.clamp(ratio, min=low, max=1.0 + inputs.clip_range_high).detach()
        per_step = -weight * inputs.advantages * inputs.log_prob
        clipped = ratio > 1.0 + inputs.clip_range_high
        if low is not None:
            clipped = clipped | (ratio < low)
        return PolicyLossOutputs(per_step=per_step, ratio=ratio, stats={"cispo_clip_fraction": _fraction(clipped)})


class SAPO(PolicyLoss):
    """
    ``sapo``: Soft Adaptive Policy Optimization, a smooth gate of the ratio in place of the hard clip::

        loss_t = -(4 / tau_t) sigmoid(tau_t (r_t - 1)) A_t,   tau_t = tau_pos if A_t > 0 else tau_neg

    At ``r_t = 1`` its gradient is the policy gradient's (``-A_t`` per unit of ``log pi``); away from 1 the gate's
    slope ``4 s (1 - s) r_t`` fades smoothly (faster for negative advantages, ``tau_neg > tau_pos``).

    Sources: TRL ``grpo_trainer.py`` (``loss_type="sapo"``, ``sapo_temperature_pos`` 1.0 / ``sapo_temperature_neg``
    1.05); verl ``core_algos.py`` ``compute_policy_loss_sapo`` (``tau_pos`` 1.0 / ``tau_neg`` 1.05). Paper: SAPO
    (arXiv:2511.20347).

    :param tau_pos: the gate's temperature where ``A_t > 0`` (> 0).
    :param tau_neg: where ``A_t <= 0`` (> 0).
    """

    def __init__(self, tau_pos: float = 1.0, tau_neg: float = 1.05):
        self.tau_pos = _option("sapo", "tau_pos", tau_pos, lambda v: v > 0, "a number > 0")
        self.tau_neg = _option("sapo", "tau_neg", tau_neg, lambda v: v > 0, "a number > 0")

    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        ratio = th.exp(inputs.log_prob - inputs.old_log_prob)
        advantages = inputs.advantages
        tau = th.where(advantages > 0, self.tau_pos, self.tau_neg).to(ratio.dtype)
        gate = th.sigmoid(tau * (ratio - 1)) * 4 / tau
        return PolicyLossOutputs(per_step=-gate * advantages, ratio=ratio)


class GPG(PolicyLoss):
    """
    ``gpg``: Group Policy Gradient, the plain policy gradient without ratio or clip::

        loss_t = -A_t log pi_theta(a_t|s_t)

    Exact on-policy only on the first gradient step of a batch (later epochs reuse the batch without correction).

    Sources: verl ``core_algos.py`` ``compute_policy_loss_gpg``. Paper: GPG (arXiv:2504.02546).
    """

    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        ratio = th.exp(inputs.log_prob - inputs.old_log_prob).detach()
        return PolicyLossOutputs(per_step=-inputs.advantages * inputs.log_prob, ratio=ratio)


# -------------------------------------------------------------------------
# Covariance-based losses
# -------------------------------------------------------------------------


def _centred_covariance(inputs: PolicyLossInputs, valid: th.Tensor) -> th.Tensor:
    """``(A_t - mean A)(log pi_t - mean log pi)`` with means over the valid steps (detached), as verl computes it."""
    advantages = inputs.advantages.detach()
    log_prob = inputs.log_prob.detach()
    return (advantages - advantages[valid].mean()) * (log_prob - log_prob[valid].mean())


class ClipCov(PolicyLoss):
    """
    ``clip_cov``: the clipped surrogate, and besides, the gradient of a few steps whose covariance
    ``c_t = (A_t - mean A)(log pi_t - mean log pi)`` is high is cut (they drive the entropy collapse)::

        loss_t = -min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t) * (0 if t is cut else 1)

    The steps cut: ``max(floor(clip_cov_ratio * m), 1)`` drawn at random (torch's generator) among the steps of the
    minibatch that the clip left alone and whose ``c_t`` lies in ``(clip_cov_lb, clip_cov_ub)``. Means over the
    steps whose weight is not zero.

    Sources: verl ``core_algos.py`` ``compute_policy_loss_clip_cov`` (defaults from ``PolicyLossConfig``: 0.0002, 1.0,
    5.0). Paper: "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models" (arXiv:2505.22617).

    :param clip_cov_ratio: the share of the minibatch's steps to cut, in ``(0, 1]``.
    :param clip_cov_lb: the covariance above which a step may be cut.
    :param clip_cov_ub: the covariance below which a step may be cut (``> clip_cov_lb``).

    Logs ``train/clip_cov_fraction``, the share of steps cut.
    """

    def __init__(self, clip_cov_ratio: float = 0.0002, clip_cov_lb: float = 1.0, clip_cov_ub: float = 5.0):
        self.clip_cov_ratio = _option("clip_cov", "clip_cov_ratio", clip_cov_ratio, lambda v: 0 < v <= 1, "in (0, 1]")
        self.clip_cov_lb = _option("clip_cov", "clip_cov_lb", clip_cov_lb, lambda v: True, "a number")
        self.clip_cov_ub = _option(
            "clip_cov", "clip_cov_ub", clip_cov_ub, lambda v: v > self.clip_cov_lb, f"a number > clip_cov_lb ({clip_cov_lb!r})"
        )

    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        ratio = th.exp(inputs.log_prob - inputs.old_log_prob)
        advantages = inputs.advantages
        loss_unclipped = -advantages * ratio
        loss_clipped = -advantages * th.clamp(ratio, 1.0 - inputs.clip_range_low, 1.0 + inputs.clip_range_high)
        valid = inputs.weights > 0
        keep = th.ones_like(advantages)
        n_valid = int(valid.sum())
        if n_valid:
            with th.no_grad():
                covariance = _centred_covariance(inputs, valid)
                clipped_already = loss_clipped > loss_unclipped
                candidates = valid & ~clipped_already & (covariance > self.clip_cov_lb) & (covariance < self.clip_cov_ub)
                index = th.nonzero(candidates).flatten()
                n_cut = min(max(int(self.clip_cov_ratio * n_valid), 1), len(index))
                if n_cut:
                    index = index[th.randperm(len(index))[:n_cut].to(index.device)]
                    keep[index] = 0.0
        per_step = th.maximum(loss_unclipped, loss_clipped) * keep
        cut = (keep == 0) & valid
        return PolicyLossOutputs(
            per_step=per_step, ratio=ratio, stats={"clip_cov_fraction": float(cut.sum()) / max(n_valid, 1)}
        )


class KLCov(PolicyLoss):
    """
    ``kl_cov``: the unclipped surrogate, with a KL penalty on the steps of highest covariance
    ``c_t = (A_t - mean A)(log pi_t - mean log pi)``::

        loss_t = -r_t A_t + (ppo_kl_coef |log r_t| if t is among the top k by c_t else 0)

    with ``k = max(floor(kl_cov_ratio * m), 1)`` over the steps whose weight is not zero. No clip: the penalty takes its
    place.

    Sources: verl ``core_algos.py`` ``compute_policy_loss_kl_cov`` (defaults from ``PolicyLossConfig``: 0.0002, 0.1).
    Paper: "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models" (arXiv:2505.22617).

    :param kl_cov_ratio: the share of the minibatch's steps penalised, in ``(0, 1]``.
    :param ppo_kl_coef: the penalty's coefficient (>= 0).

    Logs ``train/kl_cov_fraction``, the share of steps penalised.
    """

    def __init__(self, kl_cov_ratio: float = 0.0002, ppo_kl_coef: float = 0.1):
        self.kl_cov_ratio = _option("kl_cov", "kl_cov_ratio", kl_cov_ratio, lambda v: 0 < v <= 1, "in (0, 1]")
        self.ppo_kl_coef = _option("kl_cov", "ppo_kl_coef", ppo_kl_coef, lambda v: v >= 0, "a number >= 0")

    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        log_ratio = inputs.log_prob - inputs.old_log_prob
        ratio = th.exp(log_ratio)
        per_step = -inputs.advantages * ratio
        valid = inputs.weights > 0
        n_valid = int(valid.sum())
        n_penalised = 0
        if n_valid:
            with th.no_grad():
                covariance = _centred_covariance(inputs, valid).masked_fill(~valid, -th.inf)
                n_penalised = max(int(n_valid * self.kl_cov_ratio), 1)
                top = th.topk(covariance, n_penalised, largest=True).indices
                penalised = th.zeros_like(valid)
                penalised[top] = True
            per_step = th.where(penalised, per_step + self.ppo_kl_coef * log_ratio.abs(), per_step)
        return PolicyLossOutputs(per_step=per_step, ratio=ratio, stats={"kl_cov_fraction": n_penalised / max(n_valid, 1)})


# -------------------------------------------------------------------------
# Trajectory-level geometric mean
# -------------------------------------------------------------------------


class GeoMean(PolicyLoss):
    """
    ``geo_mean``: Geometric-Mean Policy Optimization, the geometric mean of a trajectory's per-step ratios, each
    clipped in log space on the side its advantage's sign makes harmful::

        l_t = sign(A_t) min(sign(A_t) log r_t, sign(A_t) clip(log r_t, -eps_low, eps_high))
        loss_i = -mean_{t in i}(A_t) exp(mean_{t in i} l_t)

    given to every step of trajectory ``i`` (GRPO's weights of ``loss_type="grpo"`` then average over trajectories,
    verl's mean over sequences). The clip ranges bound ``log r_t``: GMPO's paper uses ``(-0.4, 0.4)``, i.e.
    ``clip_range=0.4``. A step with ``A_t = 0`` contributes ``l_t = 0``. Minibatches keep whole trajectories.

    Sources: verl ``core_algos.py`` ``compute_policy_loss_geo_mean`` (as verl, the advantage is the trajectory's mean:
    GMPO is defined for one advantage per sequence). Paper: GMPO (arXiv:2507.20673).

    Logs ``train/geo_mean_clip_fraction_high`` / ``_low``: the share of steps whose log-ratio the clip changed, with a
    positive / negative advantage (verl's ``pg_clipfrac`` / ``pg_clipfrac_lower`` count every log-ratio outside the
    range, also on the side that is not clipped).
    """

    by_trajectory = True

    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        log_ratio = inputs.log_prob - inputs.old_log_prob
        advantages = inputs.advantages
        sign = th.sign(advantages)
        log_ratio_clipped = th.clamp(log_ratio, -inputs.clip_range_low, inputs.clip_range_high)
        pessimistic = sign * th.min(sign * log_ratio, sign * log_ratio_clipped)
        trajectory_ratio = th.exp(inputs.trajectory_means(pessimistic))
        trajectory_advantage = inputs.trajectory_means(advantages)
        per_step = (-trajectory_advantage * trajectory_ratio)[inputs.trajectory]
        clipped = pessimistic != log_ratio  # where the clip changed the log-ratio (a step with A = 0 is not counted)
        stats = {
            "geo_mean_clip_fraction_high": _fraction(clipped & (advantages > 0)),
            "geo_mean_clip_fraction_low": _fraction(clipped & (advantages < 0)),
        }
        return PolicyLossOutputs(per_step=per_step, ratio=th.exp(log_ratio), stats=stats)


#: name -> class, in the order the built-ins are registered.
BUILTIN_POLICY_LOSSES: dict[str, type[PolicyLoss]] = {
    "clip": ClippedSurrogate,
    "gspo": GSPO,
    "cispo": CISPO,
    "sapo": SAPO,
    "gpg": GPG,
    "clip_cov": ClipCov,
    "kl_cov": KLCov,
    "geo_mean": GeoMean,
}


@hookimpl
def register_policy_losses(register) -> None:
    register_each(register, BUILTIN_POLICY_LOSSES)
