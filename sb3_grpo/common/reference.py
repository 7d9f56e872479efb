"""A reference policy: a frozen copy of the policy being trained (:func:`frozen_copy`)."""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import torch as th
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import BasePolicy

__all__ = ["frozen_copy"]

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
