"""OnlineDPO: direct preference optimisation on groups of trajectories scored by reward functions (see
:class:`OnlineDPO`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.type_aliases import GymEnv, Schedule
from stable_baselines3.common.vec_env import VecEnv

from sb3_grpo.common.arguments import check_argument_types
from sb3_grpo.common.groups.algorithm import GroupSamplingAlgorithm
from sb3_grpo.common.groups.buffers import GroupRolloutBuffer
from sb3_grpo.common.groups.trajectories import ScoredRollout
from sb3_grpo.common.kl import kl_estimate
from sb3_grpo.common.policies import ActorPolicy
from sb3_grpo.online_dpo.buffers import PreferenceRolloutBuffer
from sb3_grpo.online_dpo.loss import LOSS_TYPES, pair_margins, preference_loss, trajectory_log_probs
from sb3_grpo.online_dpo.pairs import PAIRINGS, preference_pairs

__all__ = ["OnlineDPO"]


class OnlineDPO(GroupSamplingAlgorithm):
    """
    Online DPO: Direct Preference Optimisation (Rafailov et al. 2023) on preference pairs that the reward functions
    make from the policy's own groups of trajectories, for any Gymnasium env, without a critic or a reward model.

    Each rollout runs groups of ``group_size`` trajectories from one start state each (GRPO's group sampling: every
    slot of the VecEnv is reset with the group's seed). The reward functions score every finished trajectory; within a
    group the best scored trajectory is preferred to the worst (``pairs="best_worst"``) or every higher scored one to
    every lower scored one (``pairs="all"``); members with equal scores make no pair. For a pair (``w`` preferred to
    ``l``) the loss is

        ``-log sigmoid(beta * h)``, ``h = [log pi(tau_w) - log pi_ref(tau_w)] - [log pi(tau_l) - log pi_ref(tau_l)]``

    with ``log pi(tau)`` the sum of the policy's log-probabilities of the trajectory's actions: the env's start-state
    and transition probabilities are the same under both policies and cancel in each ratio. ``loss_type="ipo"`` uses
    IPO's ``(h - 1/(2 beta))^2`` instead. The reference ``pi_ref`` is the initial policy, or moves toward the current
    policy every ``ref_update_interval`` rollouts (TR-DPO, with ``ref_mixup_alpha``).

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``): actor only.
    :param env: the environment (a registered id, a Gymnasium env or a VecEnv, as for :class:`~sb3_grpo.GRPO`).
        Episodes must end.
    :param learning_rate: learning rate, a constant or a schedule of the remaining progress (1 to 0).
    :param n_steps: target number of steps per env slot per rollout: groups keep opening until ``n_steps * n_envs``
        steps are recorded, then the open groups finish (ignored with ``groups_per_rollout``; see GRPO's).
    :param groups_per_rollout: if given, each rollout runs exactly this many groups instead (with ``branch_every``
        segment groups, a multiple of ``n_envs // group_size``; see GRPO's).
    :param group_size: trajectories per group (G >= 2).
    :param batch_size: preference pairs per minibatch (``None``: all pairs of the rollout, one gradient step per
        epoch). Each minibatch's loss is the mean over its pairs.
    :param n_epochs: passes over the rollout's pairs.
    :param gamma: discount factor, for discounted reward functions (``Trajectory.gamma``).
    :param beta: the DPO temperature (> 0): how far from the reference the policy may move for a given preference.
    :param loss_type: ``"sigmoid"`` (DPO) or ``"ipo"`` (IPO: a squared loss that keeps ``h`` near ``1 / (2 beta)``).
    :param pairs: ``"best_worst"`` (one pair per group: its best and its worst member; among equal best or worst
        scores the first member) or ``"all"`` (every pair of members with different scores).
    :param ref_update_interval: ``None`` keeps the initial policy as reference; ``k`` moves the reference toward the
        current policy after every ``k``-th update (one update = one rollout's ``train``), as ``ref_mixup_alpha`` says.
    :param ref_mixup_alpha: the reference moves to ``ref_mixup_alpha * policy + (1 - ref_mixup_alpha) * reference``,
        parameter by parameter (TR-DPO, Gorbatovski et al. 2024, arXiv:2404.09656: its soft update, TRL's
        ``ref_model_mixup_alpha`` with ``sync_ref_model``); ``1`` (default): a copy of the policy (TR-DPO's hard update).
    :param reward_functions: names of registered reward functions or callables ``f(trajectory) -> float or (L,)``;
        their combined score orders the members of a group. ``None`` (default): the reward functions the env
        declares in ``env.metadata["reward_functions"]``, else ``["episodic_return"]``.
    :param reward_weights: one weight per reward function (default: all 1).
    :param reward_aggregation: ``"sum_then_normalize"`` or ``"normalize_then_sum"`` (see
        :class:`sb3_grpo.common.reward_scoring.RewardCombiner`).
    :param ent_coef: entropy bonus coefficient (the mean entropy over the steps of each minibatch's trajectories).
    :param max_grad_norm: gradient clipping norm (a number > 0).
    :param branch_every: branching groups (``None``: off; see :class:`~sb3_grpo.GRPO`): pairs then compare segments.
    :param branch_pivot: see :class:`~sb3_grpo.GRPO`.
    :param branch_carry_over: see :class:`~sb3_grpo.GRPO`.
    :param verify_group_starts: check that the members of every group saw the same first observation (see GRPO's).
    :param max_trajectory_length: a trajectory longer than this raises an error (an env that never ends).
    :param use_sde: gSDE exploration (Box actions; see :class:`~sb3_grpo.common.policies.ActorPolicy`).
    :param sde_sample_freq: with gSDE, new noise every ``sde_sample_freq`` steps (``-1``: one per trajectory).
    :param log_std_max: an upper bound on the Gaussian policy's log standard deviation (see GRPO's).
    :param dynamic_sampling: drop the groups without a strict preference pair (all members scored the same) and
        sample further rounds of groups until the rollout is full, for at most ``max_sampling_rounds`` rounds (see
        :class:`~sb3_grpo.GRPO`'s ``dynamic_sampling``). ``False`` (default): such groups are sampled and give no pair.
    :param max_sampling_rounds: the most rounds of groups one rollout samples with ``dynamic_sampling`` (>= 1).
    :param stats_window_size: window size for the rollout logging (episodes).
    :param tensorboard_log: the log location for tensorboard (``None``: no logging).
    :param policy_kwargs: additional arguments passed to the policy on creation.
    :param verbose: 0 no output, 1 info messages, 2 debug messages.
    :param seed: seed of the pseudo random generators (group seeds and the order of the pairs derive from it).
    :param device: device (cpu, cuda, ...) on which the code runs; ``"auto"`` picks the GPU if there is one.
    :param _init_setup_model: whether or not to build the network at the creation of the instance.

    Logged: ``train/loss`` (the last minibatch's), ``train/preference_accuracy`` (the fraction of pairs with
    ``h > 0``, i.e. where the policy already prefers the winner more than the reference does), ``train/margin`` (the
    mean implicit reward margin ``beta * h``), ``train/entropy_loss``, ``train/approx_kl`` (to the behaviour policy),
    ``train/n_updates``, ``rollout/n_pairs`` and GRPO's ``rollout/`` statistics.
    """

    policy: ActorPolicy  # type: ignore[assignment]
    rollout_buffer: PreferenceRolloutBuffer  # type: ignore[assignment]

    def __init__(
        self,
        policy: str | type[ActorPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 2048,
        groups_per_rollout: int | None = None,
        group_size: int = 8,
        batch_size: int | None = 64,
        n_epochs: int = 4,
        gamma: float = 0.99,
        beta: float = 0.1,
        loss_type: str = "sigmoid",
        pairs: str = "best_worst",
        ref_update_interval: int | None = None,
        ref_mixup_alpha: float = 1.0,
        reward_functions: Sequence[str | Callable] | str | Callable | None = None,
        reward_weights: Sequence[float] | None = None,
        reward_aggregation: str = "sum_then_normalize",
        ent_coef: float = 0.0,
        max_grad_norm: float = 0.5,
        branch_every: int | None = None,
        branch_pivot: str = "any",
        branch_carry_over: bool = True,
        verify_group_starts: bool = True,
        max_trajectory_length: int = 100_000,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        log_std_max: float | Schedule | Sequence[float] | None = None,
        dynamic_sampling: bool = False,
        max_sampling_rounds: int = 3,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
    ):
        check_argument_types(
            "OnlineDPO",
            dict(
                beta=(beta, "float"),
                ref_update_interval=(ref_update_interval, "int?"),
                ref_mixup_alpha=(ref_mixup_alpha, "float"),
            ),
        )
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            groups_per_rollout=groups_per_rollout,
            group_size=group_size,
            batch_size=batch_size,
            n_epochs=n_epochs,
            gamma=gamma,
            ent_coef=ent_coef,
            max_grad_norm=max_grad_norm,
            reward_functions=reward_functions,
            reward_weights=reward_weights,
            reward_aggregation=reward_aggregation,
            branch_every=branch_every,
            branch_pivot=branch_pivot,
            branch_carry_over=branch_carry_over,
            verify_group_starts=verify_group_starts,
            max_trajectory_length=max_trajectory_length,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            log_std_max=log_std_max,
            dynamic_sampling=dynamic_sampling,
            max_sampling_rounds=max_sampling_rounds,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
        )
        self.beta = beta
        self.loss_type = loss_type
        self.pairs = pairs
        self.ref_update_interval = ref_update_interval
        self.ref_mixup_alpha = ref_mixup_alpha
        self._finish_init(None, None, _init_setup_model)

    # ------------------------------------------------------------------ set-up

    def _check_arguments(self) -> None:
        fail = self._fail
        self._check_group_arguments()
        if not self._positive(self.beta):
            fail(f"beta (the DPO temperature) must be a finite number > 0, got {self.beta!r}")
        self._check_choice("loss_type", self.loss_type, LOSS_TYPES, " ('sigmoid': DPO, 'ipo': IPO)")
        meaning = " (best against worst member of each group, or every strictly ordered pair)"
        self._check_choice("pairs", self.pairs, PAIRINGS, meaning)

    def _setup_model(self) -> None:
        super()._setup_model()
        self.rollout_buffer = PreferenceRolloutBuffer(self.observation_space, self.action_space, self.device)

    def _uses_reference(self) -> bool:
        return True  # the preference margins are measured against it

    def _has_batch(self) -> bool:  # every group scored its members alike: nothing to prefer
        return super()._has_batch() and len(self.rollout_buffer.pairs) > 0  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ rollouts

    def _fill_batch(self, scored: ScoredRollout, rollout_buffer: GroupRolloutBuffer, env: VecEnv) -> dict[str, float]:
        """The batch of whole trajectories and its preference pairs (:func:`~sb3_grpo.online_dpo.pairs.preference_pairs`)."""
        n_trajectories = len(scored.counts)
        trajectory = np.repeat(np.arange(n_trajectories), scored.counts)
        rollout_buffer.fill(
            scored.observations,
            scored.actions,
            scored.log_prob,
            np.zeros(len(trajectory)),  # no advantages: the pairs carry the signal
            np.full(len(trajectory), 1.0 / max(len(trajectory), 1)),
            trajectory,
        )
        rollout_buffer.group_ids = scored.group_ids
        assert isinstance(rollout_buffer, PreferenceRolloutBuffer)
        rollout_buffer.pairs = preference_pairs(scored.group_ids, scored.outcomes, self.pairs)
        return {"rollout/n_pairs": len(rollout_buffer.pairs)}

    # ------------------------------------------------------------------ update

    def _reference_log_probs(self) -> th.Tensor:
        """``(M,)`` ``log pi_ref(tau)`` of every trajectory of the batch."""
        buffer = self.rollout_buffer
        steps = th.as_tensor(buffer.log_prob_under(self.ref_policy), device=self.device)
        return trajectory_log_probs(steps, th.as_tensor(buffer.trajectory, device=self.device), buffer.n_trajectories)

    def train(self) -> None:
        """Update the policy on the rollout's preference pairs: ``n_epochs`` passes of minibatches of pairs."""
        if not self._begin_update():
            return
        buffer = self.rollout_buffer
        pairs = buffer.pairs

        ref_log_prob = self._reference_log_probs()
        batch_size = len(pairs) if self.batch_size is None else int(self.batch_size)
        losses, accuracies, margins, entropies, approx_kls = [], [], [], [], []

        def epoch_minibatches() -> Iterator[np.ndarray]:
            order = self._np_rng.permutation(len(pairs))
            return (pairs[order[start : start + batch_size]] for start in range(0, len(pairs), batch_size))

        def minibatch_loss(chosen: np.ndarray) -> tuple[th.Tensor, float]:
            trajectories = np.unique(chosen)  # sorted: the minibatch's trajectory index is a position here
            samples = buffer.samples_at(buffer.trajectory_steps(trajectories))
            log_prob, entropy = self.policy.evaluate_actions(samples.observations, samples.actions)
            log_prob_tau = trajectory_log_probs(log_prob, samples.trajectory, len(trajectories))
            local = th.as_tensor(np.searchsorted(trajectories, chosen), device=self.device)
            h = pair_margins(
                log_prob_tau, ref_log_prob[th.as_tensor(trajectories, device=self.device)], local[:, 0], local[:, 1]
            )
            loss = preference_loss(h, self.beta, self.loss_type).mean()
            if entropy is None:
                entropy = -log_prob
            if self.ent_coef > 0:
                loss = loss - self.ent_coef * entropy.mean()
            with th.no_grad():
                losses.append(float(loss))
                accuracies.append(float((h > 0).float().mean()))
                margins.append(float((self.beta * h).mean()))
                entropies.append(float(entropy.mean()))
                approx_kls.append(float(kl_estimate(log_prob - samples.old_log_prob, "k3").mean()))
            return loss, approx_kls[-1]  # no early stop: OnlineDPO has no target_kl

        self._train_epochs(epoch_minibatches, minibatch_loss)

        self._adapt_learning_rate(float(np.mean(approx_kls)))
        self._end_update()

        self.logger.record("train/loss", losses[-1])
        self.logger.record("train/preference_accuracy", float(np.mean(accuracies)))
        self.logger.record("train/margin", float(np.mean(margins)))
        self.logger.record("train/entropy_loss", -float(np.mean(entropies)))
        self.logger.record("train/approx_kl", float(np.mean(approx_kls)))
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
