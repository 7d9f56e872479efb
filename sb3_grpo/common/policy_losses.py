"""
The policy-loss interface: what GRPO hands a policy loss on every minibatch, and what the loss returns.

A policy loss is the per-step objective of GRPO's update (the clipped surrogate by default). GRPO computes the
log-probabilities of the minibatch's actions, hands them with the behaviour log-probabilities, the advantages and the
aggregation weights to the loss (:class:`PolicyLossInputs`), and receives one loss per step (:class:`PolicyLossOutputs`).
What stays in GRPO, the same for every loss: the aggregation (the batch loss is ``sum(weights * per_step)``, with the
weights of ``loss_type``), the KL penalty to the reference policy (``beta`` times the ``kl_estimator`` estimate) and
the entropy bonus, both added to every step's loss, ``top_entropy_quantile`` (it zeroes the weights of the steps it
leaves out before the loss sees them), ``target_kl`` and the clip diagnostics (read from the ratio the loss returns).

Built-in losses (``clip``, ``gspo``, ``cispo``, ``sapo``, ``gpg``, ``clip_cov``, ``kl_cov``, ``geo_mean``) are in
:mod:`sb3_grpo.default_plugins.policy_losses`; a plugin adds its own through the ``register_policy_losses`` hook.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch as th

from sb3_grpo.common.groups.buffers import trajectory_sums

__all__ = ["PolicyLoss", "PolicyLossInputs", "PolicyLossOutputs", "policy_loss_name", "run_policy_loss"]


@dataclass(frozen=True)
class PolicyLossInputs:
    """
    One minibatch of ``m`` steps, as a policy loss sees it (torch tensors on the model's device).

    A step plays the part of a token in the language-model formulas, a trajectory (an episode, or a segment of one with
    branching groups) the part of a sequence.

    :param log_prob: ``(m,)`` ``log pi_theta(a_t | s_t)`` under the current policy: differentiable, the only input the
        gradient flows through.
    :param old_log_prob: ``(m,)`` log-probabilities under the behaviour policy that sampled the actions (exact: this
        library samples and trains with the same network).
    :param advantages: ``(m,)`` the advantage of each step.
    :param weights: ``(m,)`` the aggregation weights of the steps: GRPO's batch loss is ``sum(weights * per_step)``
        (``loss_type`` sets them; ``top_entropy_quantile`` zeroes those of the steps it leaves out). A loss that needs
        means over the minibatch (``clip_cov``, ``kl_cov``) takes them over the steps whose weight is not zero.
    :param trajectory: ``(m,)`` int64, the trajectory of each step, ``0 .. n_trajectories - 1`` (minibatch-local).
    :param n_trajectories: the number of trajectories the minibatch's steps belong to. A loss whose
        :attr:`PolicyLoss.by_trajectory` is true sees every step of each of them; otherwise a trajectory may be cut
        between minibatches.
    :param clip_range_low: ``epsilon_low``, the algorithm's ``clip_range`` at this update (after its schedule).
    :param clip_range_high: ``epsilon_high``, ``clip_range_high`` at this update (``clip_range_low`` when it is not set).
    :param ref_log_prob: ``(m,)`` log-probabilities under the reference policy, or ``None`` (``beta=0``: no reference).
        GRPO adds the KL penalty itself; a loss may read it for its own purposes.
    :param entropy: ``(m,)`` the entropy of the policy's action distribution at each step, or ``None`` where SB3 has no
        closed form (a squashed Gaussian). Not detached. GRPO adds the entropy bonus itself.
    """

    log_prob: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    weights: th.Tensor
    trajectory: th.Tensor
    n_trajectories: int
    clip_range_low: float
    clip_range_high: float
    ref_log_prob: th.Tensor | None = None
    entropy: th.Tensor | None = None

    def trajectory_means(self, values: th.Tensor) -> th.Tensor:
        """``(n_trajectories,)``: the mean of ``values`` (``(m,)``) over each trajectory's steps in the minibatch,
        differentiable, summed in the same order on every run (see
        :func:`~sb3_grpo.common.groups.buffers.trajectory_sums`). Index it with :attr:`trajectory` to give every step
        its trajectory's mean."""
        counts = trajectory_sums(th.ones_like(values), self.trajectory, self.n_trajectories)  # exact: integers < 2**24
        return trajectory_sums(values, self.trajectory, self.n_trajectories) / counts.clamp_min(1.0)


@dataclass
class PolicyLossOutputs:
    """
    What a policy loss returns.

    :param per_step: ``(m,)`` each step's loss, before aggregation (GRPO minimises ``sum(weights * per_step)`` plus its
        KL penalty and entropy bonus). A trajectory-level loss gives each step of a trajectory the trajectory's loss.
    :param ratio: ``(m,)`` the probability ratios ``pi_theta / pi_old`` the loss works with (per step, or each step's
        trajectory ratio), detached or not: GRPO's clip diagnostics read it (``train/clip_fraction``,
        ``train/clip_fraction_low`` / ``_high`` against ``[1 - clip_range_low, 1 + clip_range_high]``,
        ``train/importance_ess``). A loss without a ratio returns the per-step ratio all the same.
    :param stats: the loss's own statistics on this minibatch, name -> number; GRPO logs the mean over the minibatches
        of an update as ``train/<name>``. A name must not be one of GRPO's own ``train/`` keys.
    """

    per_step: th.Tensor
    ratio: th.Tensor
    stats: dict[str, float] = field(default_factory=dict)


class PolicyLoss(ABC):
    """
    Base class of policy losses.

    Subclasses implement :meth:`compute` and set :attr:`by_trajectory` where the loss reads whole trajectories. The
    constructor's keyword arguments are the loss's options (GRPO's ``policy_loss_kwargs``), each with a default; a
    keyword the constructor does not take is refused with an error naming the loss and the keywords it takes. A loss
    holds its options only: a loaded model builds it again from ``policy_loss`` and ``policy_loss_kwargs``.
    """

    #: Whether minibatches keep whole trajectories (needed by trajectory-level ratios: ``gspo``, ``geo_mean``).
    by_trajectory: ClassVar[bool] = False

    @abstractmethod
    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        """The per-step loss of one minibatch.

        :param inputs: the minibatch, see :class:`PolicyLossInputs`.
        :return: :class:`PolicyLossOutputs` with ``(m,)`` tensors.
        """

    def __repr__(self) -> str:
        options = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in options.items())})"


def policy_loss_name(loss: Any) -> str:
    """A readable name for messages: the registered name if known, else the class name."""
    return getattr(loss, "_registered_name", None) or type(loss).__name__


def run_policy_loss(loss: Any, inputs: PolicyLossInputs) -> PolicyLossOutputs:
    """Call ``loss.compute`` and check what it returns: ``(m,)`` tensors and a dict of numbers.

    :raises ValueError: naming the loss when its output is unusable.
    """
    outputs = loss.compute(inputs)
    name = policy_loss_name(loss)
    if not isinstance(outputs, PolicyLossOutputs):
        raise ValueError(f"Policy loss {name!r} returned {type(outputs).__name__}; compute must return PolicyLossOutputs.")
    m = inputs.log_prob.shape
    for what in ("per_step", "ratio"):
        value = getattr(outputs, what)
        if not isinstance(value, th.Tensor) or value.shape != m:
            shape = tuple(value.shape) if isinstance(value, th.Tensor) else type(value).__name__
            raise ValueError(f"Policy loss {name!r} returned {what} of shape {shape}; expected {tuple(m)}, one per step.")
    if not isinstance(outputs.stats, dict):
        raise ValueError(f"Policy loss {name!r} returned stats {outputs.stats!r}; expected a dict of name -> number.")
    return outputs
