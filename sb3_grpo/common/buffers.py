"""
Rollout buffers of the critic algorithms: :class:`EstimatorRolloutBuffer` / :class:`DictEstimatorRolloutBuffer`,
SB3's rollout buffers whose advantages and returns come from a registered advantage estimator instead of the
hard-wired GAE. GRPO's batch of whole trajectories is :class:`sb3_grpo.common.groups.buffers.GroupRolloutBuffer`;
:func:`minibatch_bounds` splits the batches whose size varies with the episodes (GRPO's, REINFORCE's).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.type_aliases import RolloutBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

from sb3_grpo.common.advantages import AdvantageInputs, run_estimator

__all__ = [
    "DictEstimatorRolloutBuffer",
    "EstimatorBufferMixin",
    "EstimatorRolloutBuffer",
    "minibatch_bounds",
]


def minibatch_bounds(n: int, batch_size: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each minibatch of ``batch_size`` steps covering ``n`` steps; the last holds the rest, and a
    rest of one step joins the minibatch before it (the batch size varies with the episodes: a BatchNorm layer cannot
    train on one sample, and one step's loss scaled up to the batch is noise)."""
    starts = list(range(0, n, batch_size))
    if len(starts) > 1 and n - starts[-1] == 1:
        starts.pop()
    return list(zip(starts, [*starts[1:], n], strict=True))


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
        self._views: dict[str, tuple[np.ndarray, th.Tensor]] = {}

    def _view(self, name: str) -> th.Tensor:
        """The flattened array ``name`` as a tensor sharing its memory (made again only when the attribute is
        replaced by another array; writes into the array show through)."""
        array = self.__dict__[name]
        cached = self._views.get(name)
        if cached is None or cached[0] is not array:
            source = array.astype(np.float32, copy=False) if name == "actions" else array  # SB3's cast
            cached = (array, th.as_tensor(source))
            self._views[name] = cached
        return cached[1]

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> RolloutBufferSamples:
        """SB3's minibatch (same values, dtypes and shapes), gathered by index from tensors that share the buffer's
        memory instead of converting six numpy copies per minibatch. CPU only (elsewhere SB3's own path, which
        moves only the minibatch to the device)."""
        if self.device.type != "cpu" or not self.generator_ready:
            return super()._get_samples(batch_inds, env)
        rows = th.as_tensor(batch_inds)
        return RolloutBufferSamples(
            self._view("observations")[rows],
            self._view("actions")[rows],
            self._view("values")[rows].flatten(),
            self._view("log_probs")[rows].flatten(),
            self._view("advantages")[rows].flatten(),
            self._view("returns")[rows].flatten(),
        )


class DictEstimatorRolloutBuffer(EstimatorBufferMixin, DictRolloutBuffer):
    """SB3's :class:`~stable_baselines3.common.buffers.DictRolloutBuffer` with a pluggable advantage estimator."""

    def __init__(self, *args: Any, estimator: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.estimator = estimator
