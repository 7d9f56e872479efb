"""A learning rate driven by the measured KL divergence of each update, for any algorithm whose step it sizes.

:class:`KLAdaptiveLR` is a schedule (a callable of the remaining progress, as SB3's ``learning_rate`` takes) whose
value is not a function of the progress but of the training so far: after each update the algorithm hands it the
KL divergence between the policy that collected the rollout and the policy being updated, and the rate moves by a
fixed factor when that KL leaves a band around the target. It is the step-size rule of the robotics PPO stacks:

- rsl_rl (``PPO(schedule="adaptive", desired_kl=0.01)``, ``rsl_rl/algorithms/ppo.py``): per minibatch,
  ``lr = max(1e-5, lr / 1.5)`` if ``kl > 2 desired_kl``, ``lr = min(1e-2, lr * 1.5)`` if ``0 < kl < desired_kl / 2``;
- rl_games (``AdaptiveScheduler(kl_threshold=0.008)``): the same factors and band;
- skrl (``KLAdaptiveLR(kl_threshold=0.008, min_lr=1e-6, max_lr=1e-2, kl_factor=2, lr_factor=1.5)``): the same rule,
  once per update on the mean KL of its minibatches.

Here the rule runs once per update (as skrl) on the KL the algorithm measures for that update: the mean over the
update's minibatches of the k3 estimate of ``KL(pi_old || pi)`` that it logs as ``train/approx_kl`` (GRPO,
OnlineDPO), the KL its beta controller reads (AdaptiveKLPPO, ``train/kl``), or the KL across REINFORCE's gradient
steps. The rate of the next update is the adapted one; ``train/learning_rate`` logs it.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["KLAdaptiveLR"]


class KLAdaptiveLR:
    """
    A learning rate that grows when an update moves the policy less than ``desired_kl`` and shrinks when it moves
    it more (rsl_rl's ``schedule="adaptive"``, rl_games' and skrl's adaptive schedulers). Pass it as
    ``learning_rate``; the algorithm calls :meth:`update` with each update's KL divergence.

    The rule, after an update whose measured KL is ``kl``:

    - ``kl > kl_factor * desired_kl``: ``lr <- max(lr / lr_factor, min_lr)``;
    - ``0 < kl < desired_kl / kl_factor``: ``lr <- min(lr * lr_factor, max_lr)``;
    - otherwise (in the band, exactly 0 as after an update that changed nothing, or not finite): unchanged.

    The rate it has reached is part of the model: saved with it, and a resumed run goes on from it.

    :param initial: the learning rate of the first update.
    :param desired_kl: the KL divergence per update the rate steers toward (rsl_rl's ``desired_kl``; 0.01 there).
    :param kl_factor: the band around ``desired_kl`` in which the rate stays put is
        ``[desired_kl / kl_factor, desired_kl * kl_factor]`` (> 1; 2 in all three stacks).
    :param lr_factor: the factor by which the rate moves (> 1; 1.5 in all three stacks).
    :param min_lr: the smallest rate (skrl's 1e-6).
    :param max_lr: the largest rate (1e-2 in all three stacks).
    """

    def __init__(
        self,
        initial: float = 3e-4,
        desired_kl: float = 0.01,
        kl_factor: float = 2.0,
        lr_factor: float = 1.5,
        min_lr: float = 1e-6,
        max_lr: float = 1e-2,
    ):
        for name, value in dict(
            initial=initial, desired_kl=desired_kl, kl_factor=kl_factor, lr_factor=lr_factor, min_lr=min_lr, max_lr=max_lr
        ).items():
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"KLAdaptiveLR: {name} must be a finite number > 0, got {value!r}")
        if kl_factor <= 1 or lr_factor <= 1:
            raise ValueError(
                f"KLAdaptiveLR: kl_factor and lr_factor must be > 1 (a band around desired_kl, a factor that moves the "
                f"rate), got kl_factor={kl_factor!r}, lr_factor={lr_factor!r}"
            )
        if not min_lr <= initial <= max_lr:
            raise ValueError(f"KLAdaptiveLR: initial={initial!r} must lie in [min_lr, max_lr] = [{min_lr!r}, {max_lr!r}]")
        self.initial = float(initial)
        self.desired_kl = float(desired_kl)
        self.kl_factor = float(kl_factor)
        self.lr_factor = float(lr_factor)
        self.min_lr = float(min_lr)
        self.max_lr = float(max_lr)
        #: the current learning rate
        self.lr = float(initial)

    def __call__(self, progress_remaining: float) -> float:
        """The current rate (the progress plays no part)."""
        return self.lr

    def update(self, kl: float) -> float:
        """Apply the rule to the KL divergence of the update just made; returns the rate of the next update."""
        kl = float(kl)
        if not math.isfinite(kl):
            return self.lr
        if kl > self.desired_kl * self.kl_factor:
            self.lr = max(self.lr / self.lr_factor, self.min_lr)
        elif 0.0 < kl < self.desired_kl / self.kl_factor:
            self.lr = min(self.lr * self.lr_factor, self.max_lr)
        return self.lr

    def __repr__(self) -> str:
        changed = {
            name: getattr(self, name)
            for name, default in (("kl_factor", 2.0), ("lr_factor", 1.5), ("min_lr", 1e-6), ("max_lr", 1e-2))
            if getattr(self, name) != default
        }
        extra = "".join(f", {name}={value!r}" for name, value in changed.items())
        return f"KLAdaptiveLR({self.initial!r}, desired_kl={self.desired_kl!r}{extra})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, KLAdaptiveLR) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable
