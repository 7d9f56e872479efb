"""The training batch of a group-sampling algorithm (GRPO, OnlineDPO): whole trajectories, flat per step in trajectory
order, with per-step loss weights."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces

from sb3_grpo.common.buffers import minibatch_bounds

__all__ = ["GroupRolloutBuffer", "GroupRolloutBufferSamples", "trajectory_sums"]


def trajectory_sums(values: th.Tensor, trajectory: th.Tensor, n_trajectories: int) -> th.Tensor:
    """``(n_trajectories,)``: the sum of ``values`` over the steps of each trajectory, the same bits on every run.

    ``index_add`` on a CUDA tensor adds with atomics, in an order that changes from run to run: the float sums differ
    in their last bits and a seeded training run drifts (by 1e-8, growing with training). On CUDA the sums are
    therefore ``index_put_(accumulate=True)``, which sorts the indices and adds each trajectory's values in order:
    deterministic by default, and what torch itself runs for ``index_add`` under
    ``torch.use_deterministic_algorithms(True)``. On the CPU ``index_add`` of a 1-D tensor is a serial loop, while
    ``index_put_(accumulate=True)`` adds with atomics across threads for large float tensors: there ``index_add``
    stays. Differentiable in ``values`` (both backward passes gather).

    :param values: ``(m,)`` per-step values.
    :param trajectory: ``(m,)`` the trajectory (``0..n_trajectories-1``) of each step, in any order.
    :param n_trajectories: the number of trajectories.
    """
    sums = values.new_zeros(n_trajectories)
    if values.device.type == "cpu":
        return sums.index_add(0, trajectory, values)
    return sums.index_put((trajectory,), values, accumulate=True)


class GroupRolloutBufferSamples(NamedTuple):
    """One minibatch of a group batch (torch tensors on the model's device).

    :param observations: ``(m, *obs_shape)`` (a dict of tensors for Dict spaces).
    :param actions: ``(m, action_dim)``, or ``(m,)`` longs for Discrete spaces.
    :param old_log_prob: ``(m,)`` log-probabilities under the behaviour policy.
    :param ref_log_prob: ``(m,)`` log-probabilities under the reference policy (zeros when beta = 0).
    :param advantages: ``(m,)``.
    :param weights: ``(m,)`` loss weights (see :class:`GroupRolloutBuffer`), already multiplied by ``N / m``.
    :param trajectory: ``(m,)`` minibatch-local index of each step's trajectory, ``0..n_traj-1``.
    :param n_trajectories: number of distinct trajectories in the minibatch.
    """

    observations: Any
    actions: th.Tensor
    old_log_prob: th.Tensor
    ref_log_prob: th.Tensor
    advantages: th.Tensor
    weights: th.Tensor
    trajectory: th.Tensor
    n_trajectories: int


class GroupRolloutBuffer:
    """
    The training batch of one group rollout: whole trajectories, stored flat per step in trajectory order.

    Each step carries a loss weight ``w`` such that the full-batch loss is ``sum_n w_n * loss_n``
    (``loss_type="bnpo"``: ``1/N``; ``"grpo"``: ``1/(M * L_i)``; ``"dr_grpo"``: ``1/(M * C)``, with ``N`` steps,
    ``M`` trajectories, ``L_i`` the length of the step's trajectory and ``C`` a constant). A minibatch of ``m``
    steps then estimates that loss without bias as ``(N/m) * sum_{n in minibatch} w_n * loss_n``.

    :param observation_space: observation space.
    :param action_space: action space.
    :param device: torch device of the minibatches.
    """

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, device: th.device | str = "cpu"):
        self.observation_space = observation_space
        self.action_space = action_space
        self.device = th.device(device)
        self.reset()

    def reset(self) -> None:
        self.observations: Any = None
        self.actions = np.zeros((0, 1), dtype=np.float32)
        self.old_log_prob = np.zeros(0, dtype=np.float32)
        self.ref_log_prob = np.zeros(0, dtype=np.float32)
        self.advantages = np.zeros(0, dtype=np.float32)
        self.weights = np.zeros(0, dtype=np.float64)
        self.trajectory = np.zeros(0, dtype=np.int64)
        self.n_trajectories = 0
        self.group_ids = np.zeros(0, dtype=np.int64)  # per trajectory (set by the algorithm)
        #: the batch's statistics (see :func:`sb3_grpo.common.groups.trajectories.rollout_stats`)
        self.stats: dict[str, float] = {}
        #: SB3's ``RolloutBuffer.full``: True once a rollout has filled the buffer (custom loops check it)
        self.full = False

    def size(self) -> int:
        """The steps in the batch (a method, as SB3's ``BaseBuffer.size()``)."""
        return len(self.advantages)

    def fill(
        self,
        observations: Any,
        actions: np.ndarray,
        old_log_prob: np.ndarray,
        advantages: np.ndarray,
        weights: np.ndarray,
        trajectory: np.ndarray,
    ) -> None:
        """Store a batch (all arrays flat per step, in trajectory order)."""
        self.observations = observations
        self.actions = actions
        self.old_log_prob = np.asarray(old_log_prob, dtype=np.float32)
        self.advantages = np.asarray(advantages, dtype=np.float32)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.trajectory = np.asarray(trajectory, dtype=np.int64)
        self.ref_log_prob = np.zeros_like(self.old_log_prob)
        self.n_trajectories = int(self.trajectory.max()) + 1 if len(self.trajectory) else 0
        self._offsets = np.r_[0, np.cumsum(np.bincount(self.trajectory, minlength=self.n_trajectories))]
        self.full = True

    def in_order(self, chunk: int) -> Generator[GroupRolloutBufferSamples, None, None]:
        """The whole batch in its order, ``chunk`` steps at a time."""
        for start in range(0, self.size(), chunk):
            yield self._samples(np.arange(start, min(start + chunk, self.size())))

    @th.no_grad()
    def log_prob_under(self, policy: Any, chunk: int = 4096) -> np.ndarray:
        """``(N,)`` float32: the log-probability of every step's action under ``policy`` (e.g. a reference policy)."""
        parts = [policy.evaluate_actions(b.observations, b.actions)[0].cpu().numpy() for b in self.in_order(chunk)]
        return np.concatenate(parts).astype(np.float32)

    def trajectory_steps(self, trajectories: np.ndarray) -> np.ndarray:
        """The step indices of ``trajectories`` (sorted trajectory indices), trajectory by trajectory."""
        offsets = self._offsets
        return np.concatenate([np.arange(offsets[t], offsets[t + 1]) for t in trajectories]).astype(np.int64)

    def samples_at(self, idx: np.ndarray) -> GroupRolloutBufferSamples:
        """The steps ``idx`` as one minibatch (``trajectory``: index into the sorted distinct trajectories of ``idx``)."""
        return self._samples(np.asarray(idx, dtype=np.int64))

    def _to_torch_obs(self, idx: np.ndarray) -> Any:
        if isinstance(self.observations, dict):
            return {k: th.as_tensor(v[idx], device=self.device) for k, v in self.observations.items()}
        return th.as_tensor(self.observations[idx], device=self.device)

    def get(
        self, batch_size: int | None, rng: np.random.Generator, by_trajectory: bool = False
    ) -> Generator[GroupRolloutBufferSamples, None, None]:
        """Yield shuffled minibatches covering the batch once.

        :param batch_size: steps per minibatch (``None``: the whole batch); the last one holds the rest, and a rest
            of one step joins the minibatch before it.
        :param rng: the random generator used to shuffle (the model's, for reproducibility).
        :param by_trajectory: keep every trajectory whole inside one minibatch (needed for trajectory-level
            importance ratios): trajectories are shuffled and packed until a minibatch holds ``batch_size`` steps.
        """
        n = self.size()
        batch_size = n if batch_size is None else batch_size
        if by_trajectory:
            order = rng.permutation(self.n_trajectories)
            chunk: list[np.ndarray] = []
            count = 0
            for traj in order:
                steps = np.arange(self._offsets[traj], self._offsets[traj + 1])
                chunk.append(steps)
                count += len(steps)
                if count >= batch_size:
                    yield self._samples(np.concatenate(chunk))
                    chunk, count = [], 0
            if chunk:
                yield self._samples(np.concatenate(chunk))
        else:
            indices = rng.permutation(n)
            for start, end in minibatch_bounds(n, batch_size):
                yield self._samples(indices[start:end])

    def _samples(self, idx: np.ndarray) -> GroupRolloutBufferSamples:
        trajectories, local = np.unique(self.trajectory[idx], return_inverse=True)
        scale = self.size() / len(idx)
        actions = self.actions[idx]
        if isinstance(self.action_space, spaces.Discrete):
            actions_t = th.as_tensor(actions.reshape(-1), device=self.device).long()
        elif isinstance(self.action_space, spaces.Box):
            # flat, as SB3's RolloutBuffer stores them: the Gaussian's event shape is (prod(shape),)
            actions_t = th.as_tensor(actions.reshape(len(idx), -1), device=self.device).float()
        else:
            actions_t = th.as_tensor(actions, device=self.device).float()

        def t(x: np.ndarray) -> th.Tensor:
            return th.as_tensor(x, device=self.device)

        return GroupRolloutBufferSamples(
            observations=self._to_torch_obs(idx),
            actions=actions_t,
            old_log_prob=t(self.old_log_prob[idx]),
            ref_log_prob=t(self.ref_log_prob[idx]),
            advantages=t(self.advantages[idx]),
            weights=t((self.weights[idx] * scale).astype(np.float32)),
            trajectory=t(local.reshape(-1).astype(np.int64)),
            n_trajectories=len(trajectories),
        )
