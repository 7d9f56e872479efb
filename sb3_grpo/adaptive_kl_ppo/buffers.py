"""
AdaptiveKLPPO's rollout buffers: SB3's, plus the parameters of each step's action distribution under the policy
that collected the batch (what the exact ``KL(pi_old || pi_theta)`` of the loss and of the beta update reads).

The algorithm fills :attr:`OldDistributionMixin.old_distribution` once per update, before the first minibatch;
every minibatch then carries its rows (``old_distribution``), so the epochs draw their minibatches through SB3's own
``get`` exactly as PPO does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import torch as th
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.vec_env import VecNormalize

from sb3_grpo.common.buffers import DictEstimatorRolloutBuffer, EstimatorRolloutBuffer

__all__ = [
    "DictKLRolloutBuffer",
    "KLRolloutBuffer",
    "KLRolloutBufferSamples",
    "OldDistributionMixin",
    "with_old_distribution",
]


class KLRolloutBufferSamples(NamedTuple):
    """SB3's ``RolloutBufferSamples`` (or ``DictRolloutBufferSamples``) and the old distribution's parameters.

    :param old_distribution: ``(m, n_params)`` (see :func:`sb3_grpo.common.kl.distribution_parameters`), or
        ``None`` before the algorithm stored them.
    """

    observations: Any
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    old_distribution: th.Tensor | None


class OldDistributionMixin:
    """Adds the old distributions' parameters to an SB3 rollout buffer (see the module docstring)."""

    #: ``(buffer_size * n_envs, n_params)`` in the order of the flattened buffer (env by env), or ``None``.
    old_distribution: th.Tensor | None = None
    observations: Any
    buffer_size: int
    n_envs: int
    generator_ready: bool
    swap_and_flatten: Callable[[np.ndarray], np.ndarray]
    to_torch: Callable[..., th.Tensor]

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        self.old_distribution = None

    def observation_chunks(self, chunk: int) -> Iterator[Any]:
        """The observations of every step in the flattened buffer's order, ``chunk`` rows at a time (as tensors),
        whether or not ``get`` has flattened the buffer yet (the buffer is left as it is)."""
        n_samples = self.buffer_size * self.n_envs
        observations = self.observations
        if not self.generator_ready:
            observations = (
                {key: self.swap_and_flatten(value) for key, value in observations.items()}
                if isinstance(observations, dict)
                else self.swap_and_flatten(observations)
            )
        for start in range(0, n_samples, chunk):
            rows = np.arange(start, min(start + chunk, n_samples))
            if isinstance(observations, dict):
                yield {key: self.to_torch(value[rows]) for key, value in observations.items()}
            else:
                yield self.to_torch(observations[rows])

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Any:
        """SB3's samples of the rows ``batch_inds``, with their old distributions (a :class:`KLRolloutBufferSamples`)."""
        samples: Any = super()._get_samples(batch_inds, env)  # type: ignore[misc]
        old = self.old_distribution
        if old is not None:
            old = old[th.as_tensor(batch_inds, device=old.device)]
        return KLRolloutBufferSamples(
            samples.observations,
            samples.actions,
            samples.old_values,
            samples.old_log_prob,
            samples.advantages,
            samples.returns,
            old_distribution=old,
        )


class KLRolloutBuffer(OldDistributionMixin, EstimatorRolloutBuffer):
    """:class:`~sb3_grpo.common.buffers.EstimatorRolloutBuffer` with the old distributions' parameters."""


class DictKLRolloutBuffer(OldDistributionMixin, DictEstimatorRolloutBuffer):
    """:class:`~sb3_grpo.common.buffers.DictEstimatorRolloutBuffer` with the old distributions' parameters."""


_WITH_OLD_DISTRIBUTION: dict[type, type] = {}


def with_old_distribution(buffer_class: type[RolloutBuffer]) -> type[RolloutBuffer]:
    """``buffer_class`` itself if it keeps the old distributions, else a subclass of it that does (made once)."""
    if issubclass(buffer_class, OldDistributionMixin):
        return buffer_class
    if buffer_class not in _WITH_OLD_DISTRIBUTION:
        if not issubclass(buffer_class, (RolloutBuffer, DictRolloutBuffer)):
            raise TypeError(f"rollout_buffer_class must be an SB3 RolloutBuffer class, got {buffer_class!r}")
        name = f"{buffer_class.__name__}WithOldDistribution"
        _WITH_OLD_DISTRIBUTION[buffer_class] = type(name, (OldDistributionMixin, buffer_class), {})
    return _WITH_OLD_DISTRIBUTION[buffer_class]
