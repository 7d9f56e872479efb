"""Two advantage estimators: one for GRPO's groups, one for the critic algorithms.

- ``group_rank`` (:class:`GroupRank`): each trajectory's centred rank within its group (GRPO).
- ``upgo`` (:class:`UPGO`): the upgoing policy update of AlphaStar, for ExactTRPO and AdaptiveKLPPO (a critic).
"""

from __future__ import annotations

import numpy as np

from sb3_grpo import AdvantageEstimator, AdvantageInputs, AdvantageOutputs


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks ``1..n`` of ``values``, tied values sharing their average rank: ``(3, 10, 3, 0) -> (2.5, 4, 2.5, 1)``."""
    _, inverse, counts = np.unique(np.asarray(values), return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - counts + (counts + 1) / 2.0)[inverse.reshape(-1)]


class GroupRank(AdvantageEstimator):
    """
    ``A_i = (rank_i - mean rank) / ((G - 1) / 2)``: the centred rank of a trajectory's outcome within its group of
    ``G``, in ``[-1, 1]``. Ties share their average rank; a group whose outcomes are all equal (or a group of one)
    gets exactly zero. Invariant to any increasing transformation of the rewards, so one outlier or a badly scaled
    reward function cannot dominate the update.

    :param scale: ``"range"`` (default: divide by ``(G - 1) / 2``, so the best member gets +1 and the worst -1),
        ``"std"`` (divide by the standard deviation of the group's centred ranks) or ``"none"`` (raw centred ranks).
    """

    requires = frozenset({"outcome_rewards", "group_ids"})

    def __init__(self, scale: str = "range"):
        if scale not in ("range", "std", "none"):
            raise ValueError(f"group_rank: scale must be 'range', 'std' or 'none', got {scale!r}")
        self.scale = scale

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        rewards = np.asarray(inputs.outcome_rewards, dtype=np.float64)
        group_ids = np.asarray(inputs.group_ids)
        advantages = np.zeros_like(rewards)
        for group in np.unique(group_ids):
            members = np.flatnonzero(group_ids == group)
            if len(members) < 2:
                continue
            centred = average_ranks(rewards[members]) - (len(members) + 1) / 2.0
            if self.scale == "range":
                centred = centred / ((len(members) - 1) / 2.0)
            elif self.scale == "std":
                std = centred.std()
                centred = centred / std if std > 0 else centred
            advantages[members] = centred
        return AdvantageOutputs(advantages=inputs.broadcast(advantages))


class UPGO(AdvantageEstimator):
    """
    Upgoing policy update (UPGO; Vinyals et al. 2019, "Grandmaster level in StarCraft II", Nature 575): follow the
    sampled continuation only while it did better than the critic expected, and bootstrap with the critic where
    it did worse::

        G_t = r_t + gamma * (G_{t+1}  if Q_{t+1} >= V(s_{t+1})  else V(s_{t+1})),    A_t = G_t - V(s_t)

    with ``Q_{t+1} = r_{t+1} + gamma V(s_{t+2})`` the one-step estimate of the action taken at ``t+1``. At the end of
    an episode ``G_t = r_t``; at the end of the rollout ``G_t = r_t + gamma V(s_{t+1})``.

    The critic's regression targets (``returns``, which a critic estimator must give) are the TD(lambda) returns,
    as SB3's GAE gives them: UPGO's ``G_t`` is biased upward and would inflate the critic.

    A critic estimator works on SB3's rollout layout: ``(T, B)`` arrays for ``B`` env slots, where a new episode
    may start in the middle of a column (``inputs.episode_starts[t] == 1``), and the row after the last one is
    described by ``inputs.last_values`` (the value of the next state) and ``inputs.dones`` (whether the episode
    ended there, so there is nothing to bootstrap).

    :param gae_lambda: lambda of the critic's TD(lambda) targets (default: the algorithm's ``gae_lambda``).
    """

    requires = frozenset({"values", "step_rewards"})

    def __init__(self, gae_lambda: float | None = None):
        if gae_lambda is not None and not 0.0 <= gae_lambda <= 1.0:
            raise ValueError(f"upgo: gae_lambda must be in [0, 1], got {gae_lambda}")
        self.gae_lambda = gae_lambda

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        gamma = float(inputs.gamma)
        lam = inputs.gae_lambda if self.gae_lambda is None else self.gae_lambda
        rewards = np.asarray(inputs.rewards, dtype=np.float64)
        values = np.asarray(inputs.values, dtype=np.float64)
        n_steps = rewards.shape[0]
        # What follows step t: does the episode go on (1) or end (0), and the value of the next state.
        go_on = np.empty_like(rewards)
        go_on[:-1] = 1.0 - np.asarray(inputs.episode_starts, dtype=np.float64)[1:]
        go_on[-1] = 1.0 - np.asarray(inputs.dones, dtype=np.float64)
        next_values = np.empty_like(rewards)
        next_values[:-1] = values[1:]
        next_values[-1] = np.asarray(inputs.last_values, dtype=np.float64).reshape(-1)
        one_step = rewards + gamma * go_on * next_values  # Q(s_t, a_t) estimated from one reward and the critic

        upgo = np.empty_like(rewards)
        returns = np.empty_like(rewards)
        upgo[-1] = returns[-1] = one_step[-1]
        for t in range(n_steps - 2, -1, -1):
            went_up = one_step[t + 1] >= values[t + 1]
            upgo[t] = rewards[t] + gamma * go_on[t] * np.where(went_up, upgo[t + 1], values[t + 1])
            returns[t] = rewards[t] + gamma * go_on[t] * ((1.0 - lam) * values[t + 1] + lam * returns[t + 1])
        return AdvantageOutputs(advantages=upgo - values, returns=returns)
