"""A reference policy: a frozen copy of the policy being trained (:func:`frozen_copy`), moved toward the policy from
time to time (:func:`update_reference`)."""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import torch as th
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import BasePolicy

__all__ = ["frozen_copy", "update_reference"]

_Policy = TypeVar("_Policy", bound=BasePolicy)


def _detached_noise(policy: BasePolicy) -> dict[int, th.Tensor]:
    """A ``deepcopy`` memo that copies the policy's computed tensors (gSDE's exploration matrices and noise
    distribution, drawn from ``log_std`` and so not graph leaves, which ``deepcopy`` refuses) as detached copies."""
    memo: dict[int, th.Tensor] = {}

    def scan(obj: Any, depth: int) -> None:
        for value in vars(obj).values():
            if isinstance(value, th.Tensor):
                if not value.is_leaf:
                    memo[id(value)] = value.detach().clone()
            elif depth < 2 and isinstance(value, (Distribution, th.distributions.Distribution)):
                scan(value, depth + 1)

    for module in policy.modules():
        scan(module, 0)
    return memo


def frozen_copy(policy: _Policy) -> _Policy:
    """A copy of ``policy`` that never trains (the reference policy of an algorithm that keeps one): eval mode, no
    optimizer, no gradients. Works with gSDE too (its noise tensors are copied detached)."""
    ref = copy.deepcopy(policy, _detached_noise(policy))
    ref.optimizer = None  # type: ignore[assignment]
    ref.set_training_mode(False)
    for param in ref.parameters():
        param.requires_grad_(False)
    return ref


@th.no_grad()
def update_reference(reference: BasePolicy, policy: BasePolicy, alpha: float = 1.0) -> None:
    """Move ``reference`` toward ``policy``: every floating-point tensor of its state becomes
    ``alpha * policy + (1 - alpha) * reference`` (TRL's ``SyncRefModelCallback``, ``sync_ref_model`` with
    ``ref_model_mixup_alpha``, from TR-DPO, arXiv:2404.09656); other tensors (counters) are copied. ``alpha=1`` is a
    copy of the policy, bit for bit.

    Reference: TRL ``trl/trainer/callbacks.py``, ``SyncRefModelCallback._sync_target_model``:
    ``target.mul_(1 - alpha).add_(source, alpha=alpha)``, the same operations as here.

    :param reference: the reference policy, changed in place.
    :param policy: the policy being trained (same architecture).
    :param alpha: the weight of the policy, in ``(0, 1]``.
    """
    state = policy.state_dict()
    if alpha == 1.0:
        reference.load_state_dict(state)
        return
    for name, target in reference.state_dict().items():  # tensors that share the reference's storage
        if target.is_floating_point():
            target.mul_(1.0 - alpha).add_(state[name], alpha=alpha)
        else:
            target.copy_(state[name])
