"""
Rollout buffers of the critic algorithms: :class:`EstimatorRolloutBuffer` / :class:`DictEstimatorRolloutBuffer`,
SB3's rollout buffers whose advantages and returns come from a registered advantage estimator instead of the
hard-wired GAE. GRPO's batch of whole trajectories is :class:`sb3_grpo.common.groups.buffers.GroupRolloutBuffer`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

from sb3_grpo.common.advantages import AdvantageInputs, run_estimator

__all__ = [
    "DictEstimatorRolloutBuffer",
    "EstimatorBufferMixin",
    "EstimatorRolloutBuffer",
]


class EstimatorBufferMixin:
    """Replaces ``compute_returns_and_advantage`` with a call to ``self.estimator`` on the critic layout."""

    estimator: Any = None
    rewards: np.ndarray
    values: np.ndarray
    episode_starts: np.ndarray
    advantages: np.ndarray
    returns: np.ndarray
    gamma: float
    gae_lambda: float

    def compute_returns_and_advantage(self, last_values: th.Tensor, dones: np.ndarray) -> None:
        """Fill ``advantages`` and ``returns`` with the configured estimator (SB3's GAE when it is ``gae``).

        :param last_values: value of the state after the last step, one per env.
        :param dones: whether the last step ended each env's episode.
        """
        if self.estimator is None:
            raise RuntimeError("EstimatorRolloutBuffer.estimator is not set; the algorithm must assign one.")
        inputs = AdvantageInputs(
            rewards=self.rewards,
            episode_starts=self.episode_starts,
            values=self.values,
            last_values=last_values.clone().cpu().numpy().flatten(),
            dones=np.asarray(dones),
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
        )
        outputs = run_estimator(self.estimator, inputs)
        if outputs.returns is None:
            raise ValueError(
                f"Advantage estimator {type(self.estimator).__name__} returned no returns; a critic algorithm needs them "
                "as regression targets for its value function."
            )
        self.advantages = np.asarray(outputs.advantages, dtype=np.float32)
        self.returns = np.asarray(outputs.returns, dtype=np.float32)


class EstimatorRolloutBuffer(EstimatorBufferMixin, RolloutBuffer):
    """SB3's :class:`~stable_baselines3.common.buffers.RolloutBuffer` with a pluggable advantage estimator.

    :param estimator: an advantage estimator instance (``requires`` within ``{"values", "step_rewards"}``).
    """

    def __init__(self, *args: Any, estimator: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.estimator = estimator


class DictEstimatorRolloutBuffer(EstimatorBufferMixin, DictRolloutBuffer):
    """SB3's :class:`~stable_baselines3.common.buffers.DictRolloutBuffer` with a pluggable advantage estimator."""

    def __init__(self, *args: Any, estimator: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.estimator = estimator
