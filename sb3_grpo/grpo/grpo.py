"""GRPO: critic-free group relative policy optimisation for any Gymnasium env (see :class:`GRPO`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.type_aliases import GymEnv, Schedule
from stable_baselines3.common.utils import FloatSchedule
from stable_baselines3.common.vec_env import VecEnv

from sb3_grpo.common.arguments import check_argument_types
from sb3_grpo.common.base_class import GROUP_PROVIDES
from sb3_grpo.common.groups.algorithm import NUMBER_TYPES, GroupSamplingAlgorithm
from sb3_grpo.common.groups.buffers import GroupRolloutBuffer, GroupRolloutBufferSamples
from sb3_grpo.common.groups.collector import NonReproducibleResetError
from sb3_grpo.common.groups.trajectories import ScoredRollout
from sb3_grpo.common.kl import KL_ESTIMATORS, kl_estimate
from sb3_grpo.common.kl_control import kl_argument_problem, next_beta, penalize_rewards, reference_log_probs
from sb3_grpo.common.policies import ActorPolicy
from sb3_grpo.common.policy_losses import PolicyLossInputs, policy_loss_name, run_policy_loss
from sb3_grpo.grpo.batch import build_batch
from sb3_grpo.grpo.loss import (
    GROUP_LOSS_SCALES,
    IMPORTANCE_SAMPLING_LEVELS,
    LOSS_TYPES,
    entropy_mask,
    ratio_statistics,
)
from sb3_grpo.plugins import get_policy_loss

__all__ = ["GRPO", "GRPO_TRAIN_KEYS", "NonReproducibleResetError"]

#: The ``train/`` keys GRPO records itself (a policy loss's statistics may not take these names).
GRPO_TRAIN_KEYS = frozenset(
    f"train/{key}"
    for key in (
        "policy_gradient_loss", "entropy_loss", "approx_kl", "clip_fraction", "clip_fraction_low", "clip_fraction_high",
        "importance_ess", "kl_ref", "beta", "loss", "clip_range", "clip_range_high", "std", "log_std_max", "n_updates",
        "learning_rate", "group_reward_std", "zero_std_group_fraction",
    )
)  # fmt: skip


class GRPO(GroupSamplingAlgorithm):
    """
    Group Relative Policy Optimisation (Shao et al. 2024, DeepSeekMath), for any Gymnasium env, without a critic.

    Each rollout runs groups of ``group_size`` trajectories; the members of a group start from the same state
    (every slot of the VecEnv is reset with the group's seed, through whatever wrappers are stacked on it). Each
    finished trajectory is scored by the reward functions, and the advantage estimator compares it with its group
    (default ``group_auto``: where every trajectory is rewarded on its last step only, DeepSeekMath's
    ``group_zscore``, ``(R_i - mean_group) / std_group`` on every step; otherwise ``group_step_baseline``, at every
    step the member's discounted reward-to-go minus the mean of the other members' at the same step, divided by the
    batch's standard deviation). The loss per step is the policy loss (``policy_loss``, default the clipped
    surrogate ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)`` with ``r = pi_theta / pi_old``), plus
    ``beta * KL(pi_theta || pi_ref)`` estimated with ``kl_estimator`` (default k3,
    ``pi_ref/pi_theta - log(pi_ref/pi_theta) - 1``; with ``kl_in_reward`` a penalty of the rewards instead), minus the
    entropy bonus, averaged as ``loss_type`` says.

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``): actor only.
    :param env: the environment (a registered id, a Gymnasium env or a VecEnv: DummyVecEnv or SubprocVecEnv,
        with VecNormalize / VecMonitor / VecFrameStack on top if wanted; any number of envs). Episodes must end:
        wrap envs without a time limit in ``gymnasium.wrappers.TimeLimit``.
    :param learning_rate: learning rate, a constant or a schedule of the remaining progress (1 to 0).
    :param n_steps: target number of steps per env slot per rollout: groups keep opening until
        ``n_steps * n_envs`` steps are recorded, then the open groups finish (ignored with ``groups_per_rollout``).
        A slot reserves its next trajectory as it starts one (SB3's VecEnvs reset a slot inside ``step``, so the
        next start state must be in place before the episode ends), so a rollout runs at least
        ``ceil(2 * n_envs / group_size)`` groups however small ``n_steps`` is: with ``n_envs == group_size``, two
        whole groups. Where episodes are long, ``groups_per_rollout`` gives smaller rollouts.
    :param groups_per_rollout: if given, each rollout runs exactly this many groups instead (every member of a
        group is run, so the rollout holds ``groups_per_rollout * group_size`` whole trajectories). With
        ``branch_every`` they are segment groups, one per block of ``group_size`` slots per segment, so a multiple of
        ``n_envs // group_size``.
    :param group_size: trajectories per group (G >= 2).
    :param batch_size: minibatch size in steps (``None``: the whole batch, one gradient step per epoch); the last
        minibatch of an epoch holds the rest, and a rest of one step joins the minibatch before it.
    :param n_epochs: passes over each batch (mu in the GRPO paper).
    :param gamma: discount factor, used by discounted reward functions and estimators.
    :param clip_range: lower clipping parameter eps_low (and eps_high unless ``clip_range_high`` is given);
        a float or a schedule.
    :param clip_range_high: upper clipping parameter eps_high (DAPO's "clip-higher"), ``None`` = ``clip_range``.
    :param beta: coefficient of the KL penalty to the reference policy. ``0`` skips the reference policy entirely
        (no copy, no forward pass). With ``kl_target`` the initial coefficient: ``model.beta`` then holds the adapted
        one (saved with the model).
    :param ref_update_interval: ``None`` keeps the initial policy as reference; ``k`` moves the reference toward the
        current policy every ``k`` updates (one update = one call of ``train``), as ``ref_mixup_alpha`` says.
    :param ref_mixup_alpha: the reference moves to ``ref_mixup_alpha * policy + (1 - ref_mixup_alpha) * reference``,
        parameter by parameter (TRL's ``ref_model_mixup_alpha``, from TR-DPO); ``1`` (default): a copy of the policy.
    :param loss_type: how the per-step losses are aggregated into the batch loss (for every ``policy_loss``):
        ``"grpo"`` (mean over each trajectory's steps, then over trajectories: verl's ``loss_agg_mode``
        ``"seq-mean-token-mean"``), ``"bnpo"`` / ``"dapo"`` (mean over all steps of the batch: verl's
        ``"token-mean"``), ``"dr_grpo"`` (sum over steps divided by ``M * C``, with M trajectories and C the env's
        ``max_episode_steps``, else the longest trajectory of the first batch: verl's ``"seq-mean-token-sum-norm"``).
    :param group_loss_scale: ``"mean"`` divides each group's summed loss by G; ``"sqrt"`` by sqrt(G) (so the
        signal of large groups does not shrink).
    :param importance_sampling_level: deprecated: ``"trajectory"`` is ``policy_loss="gspo"`` (GSPO: one ratio per
        trajectory, ``exp(mean_t log r_t)``; minibatches then hold whole trajectories), with the same numbers, and
        warns; ``"step"`` (default): the ratios of ``policy_loss``.
    :param policy_loss: the per-step objective: a registered policy loss name, a :class:`~sb3_grpo.PolicyLoss` class
        (or factory) or instance. Built-in: ``"clip"`` (default, the clipped surrogate; options ``clip_ratio_c``,
        verl's dual clip, and ``delta``, INTELLECT-2's upper clip), ``"gspo"``, ``"cispo"``, ``"sapo"``, ``"gpg"``,
        ``"clip_cov"``, ``"kl_cov"``, ``"geo_mean"``; each with its formula and source in the built-ins page. Plugins
        add others (the ``register_policy_losses`` hook).
    :param policy_loss_kwargs: the options of the policy loss (keyword arguments of its constructor).
    :param kl_estimator: the estimator of the KL penalty to the reference (with ``beta > 0``), from
        ``log_ratio = log pi_ref - log pi_theta`` on the batch's actions: ``"k1"`` (``-log_ratio``), ``"k2"``
        (``log_ratio**2 / 2``), ``"k3"`` (default, ``exp(log_ratio) - 1 - log_ratio``), ``"k3+"`` (the value of k3 with
        the gradient of k2, verl's straight-through estimator, whose gradient is the KL's in expectation).
    :param kl_in_reward: where the KL penalty acts (verl's ``use_kl_in_reward``): ``False`` (default) in the loss, as
        above; ``True`` in the reward: ``beta`` times the ``kl_estimator`` value of ``KL(pi_old || pi_ref)`` at each
        step (behaviour and reference log-probabilities at rollout time, no gradient) comes off the rewards before the
        advantages, and the loss has no KL term. Off each step's reward where rewards come at every step (verl: each
        token's); where every trajectory is rewarded on its last step only, the trajectory's sum comes off that
        outcome, which is what outcome estimators read (verl's GRPO sums the token rewards) and keeps ``group_auto``'s
        choice (:func:`~sb3_grpo.common.kl_control.penalize_rewards`). ``train/kl_ref`` logs that rollout-time KL.
    :param kl_target: adapt ``beta`` after every update toward this KL (verl's ``AdaptiveKLController``, Ziegler et
        al. 2019): ``beta *= 1 + clip(kl / kl_target - 1, -0.2, 0.2) * n / kl_horizon``, ``kl`` the update's
        ``train/kl_ref``, ``n`` its batch's trajectories. Needs ``beta > 0``; ``None`` (default): a fixed ``beta``.
    :param kl_horizon: the horizon of the ``kl_target`` rule, in trajectories (verl's ``horizon``, in sequences:
        10000 by default): per update ``beta`` moves by at most a factor ``1 +- 0.2 * n / kl_horizon``.
    :param top_entropy_quantile: train the policy loss only on the steps of each minibatch whose policy entropy is in
        the top ``top_entropy_quantile`` share (TRL's ``top_entropy_quantile``, "Beyond the 80/20 rule",
        arXiv:2506.01939, recommends 0.2): the other steps' weights are zeroed before the policy loss sees them (the
        KL penalty and the entropy bonus still act on every step). A number in ``(0, 1]``; ``None`` (default): every
        step. Where the action distribution has no closed-form entropy (a squashed Gaussian), ``-log pi`` of the
        sampled action stands in for it.
    :param reward_functions: names of registered reward functions or callables ``f(trajectory) -> float or (L,)``.
        ``None`` (default): the reward functions the env declares in ``env.metadata["reward_functions"]`` (the
        question-answer envs declare their verifiable rewards), else ``["episodic_return"]``, the env's own return.
    :param reward_weights: one weight per reward function (default: all 1).
    :param reward_aggregation: ``"sum_then_normalize"`` or ``"normalize_then_sum"`` (see
        :class:`sb3_grpo.common.reward_scoring.RewardCombiner`).
    :param reward_gammas: one discount per reward function (``None``: all use ``gamma``), for an estimator that
        discounts each function's per-step rewards separately (``"group_step_baseline"`` with ``lam=1``). A survival
        bonus can look far ahead while a speed reward is credited to the steps around it:
        ``reward_functions=["without_healthy_reward", "healthy_reward"], reward_gammas=[0.97, 0.999]`` on Hopper-v5.
        Reward functions still see ``gamma`` in ``Trajectory.gamma``.
    :param advantage_estimator: a registered estimator name, class or instance that fits GRPO. Default
        ``"group_auto"``, decided by each batch's rewards: ``"group_zscore"`` (one score per whole trajectory,
        DeepSeekMath's outcome supervision) where every trajectory is rewarded on its last step only (reward
        functions that return one float, such as ``arithmetic_exact_match``), ``"group_step_baseline"`` (a per-step
        group baseline, which credits each step with the rewards that follow it) where rewards come at every step
        (SB3's identity envs, CartPole-v1, Pendulum-v1, MuJoCo). Each half is the better one on its kind of task;
        measured in the GRPO module docs ("Why this default").
    :param advantage_kwargs: options of the estimator.
    :param ent_coef: entropy bonus coefficient.
    :param max_grad_norm: gradient clipping norm (a number > 0).
    :param target_kl: stop the epochs early when the approximate KL to the behaviour policy exceeds
        ``1.5 * target_kl`` (``None``: never).
    :param branch_every: branching groups (``None``: off). Every ``branch_every`` steps, all members of a group are
        set to the state that one member, chosen at random beforehand, reached, and the next segment is a fresh group
        comparison (the vine idea of the TRPO paper, without critic). Needs ``n_envs`` to be a multiple of
        ``group_size`` (each block of G slots runs one group in lockstep) and a state snapshotter for the env
        (built-in: classic control and MuJoCo; others via the ``register_state_snapshots`` hook). Segments should
        span about ``1 / (1 - gamma)`` steps or more. Trajectories handed to reward functions and estimators are
        segments; ``rollout/ep_rew_mean`` then reports segment returns, so judge progress by evaluation.
    :param branch_carry_over: with branching groups, episodes go on across rollouts: a rollout starts from the states
        the previous one ended with (saved with the model; ``learn(reset_num_timesteps=True)`` starts new groups).
        ``False``: every rollout starts new groups from reset, which caps episodes at the rollout's length rounded up
        to whole segments (a curriculum of early-episode states; measured in the docs' GRPO studies).
    :param branch_pivot: which member's state the next segment branches from. ``"any"`` (default): a member drawn at
        random before the segment; if its episode ended within the segment, the block starts a new group from a
        fresh reset. ``"alive"``: if that member's episode ended, a member drawn at random among those still running
        (each survivor equally likely); a new group only when every member's episode ended. On envs whose episodes
        end early while learning (Hopper), ``"any"`` keeps restarting from reset and rarely trains on later states.
    :param branch_common_noise: with branching groups, the vine of TRPO (Schulman et al. 2015, section 5.2) with
        common random numbers: after a segment's first step the members of a group draw their actions from shared
        noise, so the differences of their segment returns come from their first actions (in an env that is
        deterministic given state and actions, such as MuJoCo), and each segment trains on its first step only, with
        the advantage of ``advantage_estimator`` there (the later steps' actions share their noise across members,
        so comparing them within the group would be biased). Diagonal Gaussian (without gSDE) and categorical
        policies. The variance it removes is measured in the long-episodes guide.
    :param verify_group_starts: check that the members of every group saw the same first observation and raise
        :class:`NonReproducibleResetError` if not. Set ``False`` only for envs whose seeded resets are knowingly
        not reproducible (the group baseline then compares different start states).
    :param max_trajectory_length: a trajectory longer than this raises an error (an env that never ends).
    :param use_sde: generalised state-dependent exploration (gSDE, Box actions): each env slot explores with its own
        noise matrix, so a member's exploration changes smoothly with the state (see :class:`ActorPolicy`).
    :param sde_sample_freq: with gSDE, draw new noise matrices for every slot every ``sde_sample_freq`` steps of a
        rollout (as SB3); ``-1`` (default): one noise matrix per trajectory, drawn when it starts.
    :param log_std_max: an upper bound on the Gaussian policy's log standard deviation (Box actions), applied to the
        policy's ``log_std`` parameter before every rollout: a number, a schedule of the remaining progress (1 to 0),
        or a pair ``(start, end)`` for a bound that moves linearly from ``start`` to ``end`` over training (what a
        YAML zoo entry can express). ``None`` (default): no bound. The entropy bonus and the policy gradient still
        move ``log_std`` during an update; the bound holds for every rollout, so a falling bound brings the late
        stochastic policy closer to the deterministic one that evaluation runs. With gSDE it bounds the log standard
        deviation of the exploration matrix's entries.
    :param dynamic_sampling: DAPO's dynamic sampling: drop the groups whose members all got the same score (their
        advantages are all zero: no signal) and sample further rounds of groups until the informative ones fill the
        rollout (``groups_per_rollout`` informative groups, else ``n_steps * n_envs`` steps of them; later rounds
        sample what is missing), for at most ``max_sampling_rounds`` rounds. "The same" is exact equality of the
        combined scores. Every step taken counts in ``num_timesteps``, dropped groups' too. When the rounds run out
        first, training goes on with the informative groups there are (no update if there are none) and a warning
        says so, once per ``learn``. Logs ``rollout/informative_group_fraction`` (informative groups / groups sampled)
        and ``rollout/sampling_rounds``; ``rollout/outcome_reward_mean`` and ``train/zero_std_group_fraction`` then
        describe every group sampled, the other ``rollout/`` entries the batch. Not with ``branch_every``.
        ``False`` (default): every group trains.
    :param max_sampling_rounds: the most rounds of groups one rollout samples with ``dynamic_sampling`` (>= 1).
    :param stats_window_size: window size for the rollout logging (episodes).
    :param tensorboard_log: the log location for tensorboard (``None``: no logging).
    :param policy_kwargs: additional arguments passed to the policy on creation.
    :param verbose: 0 no output, 1 info messages, 2 debug messages.
    :param seed: seed of the pseudo random generators (group seeds derive from it). Every rollout starts by
        reseeding torch's global generator from the model's own generator (saved with the model): that is what makes a
        run resumed from a save, or from a checkpoint taken mid-rollout, continue exactly like the uninterrupted one.
    :param device: device (cpu, cuda, ...) on which the code runs; ``"auto"`` picks the GPU if there is one.
    :param _init_setup_model: whether or not to build the network at the creation of the instance.
    """

    estimator_provides = GROUP_PROVIDES

    def __init__(
        self,
        policy: str | type[ActorPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 2048,
        groups_per_rollout: int | None = None,
        group_size: int = 8,
        batch_size: int | None = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        clip_range: float | Schedule = 0.2,
        clip_range_high: float | Schedule | None = None,
        beta: float = 0.0,
        ref_update_interval: int | None = None,
        ref_mixup_alpha: float = 1.0,
        loss_type: str = "bnpo",
        group_loss_scale: str = "mean",
        importance_sampling_level: str = "step",
        policy_loss: Any = "clip",
        policy_loss_kwargs: dict[str, Any] | None = None,
        kl_estimator: str = "k3",
        kl_in_reward: bool = False,
        kl_target: float | None = None,
        kl_horizon: float = 10_000,
        top_entropy_quantile: float | None = None,
        reward_functions: Sequence[str | Callable] | str | Callable | None = None,
        reward_weights: Sequence[float] | None = None,
        reward_aggregation: str = "sum_then_normalize",
        reward_gammas: Sequence[float] | None = None,
        advantage_estimator: Any = "group_auto",
        advantage_kwargs: dict[str, Any] | None = None,
        ent_coef: float = 0.0,
        max_grad_norm: float = 0.5,
        target_kl: float | None = None,
        branch_every: int | None = None,
        branch_pivot: str = "any",
        branch_carry_over: bool = True,
        branch_common_noise: bool = False,
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
        check_argument_types(  # copied with dict() below: checked first (the rest in _check_arguments)
            "GRPO",
            dict(advantage_kwargs=(advantage_kwargs, "dict?"), policy_loss_kwargs=(policy_loss_kwargs, "dict?")),
        )
        if importance_sampling_level == "trajectory":
            warnings.warn(
                "GRPO: importance_sampling_level='trajectory' is deprecated; it is policy_loss='gspo' (GSPO's trajectory "
                "ratio, the same numbers). Write policy_loss='gspo' instead.",
                FutureWarning,
                stacklevel=2,
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
        self.clip_range = clip_range
        self.clip_range_high = clip_range_high
        self.beta = beta
        self.ref_update_interval = ref_update_interval
        self.ref_mixup_alpha = ref_mixup_alpha
        self.loss_type = loss_type
        self.loss_constant: float | None = None  # dr_grpo's constant, set by the first batch (saved with the model)
        self.group_loss_scale = group_loss_scale
        self.importance_sampling_level = importance_sampling_level
        self.policy_loss = policy_loss
        self.policy_loss_kwargs = dict(policy_loss_kwargs or {})
        self.kl_estimator = kl_estimator
        self.kl_in_reward = kl_in_reward
        self.kl_target = kl_target
        self.kl_horizon = kl_horizon
        self.top_entropy_quantile = top_entropy_quantile
        self.reward_gammas = None if reward_gammas is None else [float(g) for g in reward_gammas]
        self.target_kl = target_kl
        self.branch_common_noise = branch_common_noise
        self._finish_init(advantage_estimator, dict(advantage_kwargs or {}), _init_setup_model)

    # ------------------------------------------------------------------ set-up

    def _check_arguments(self) -> None:
        fail = self._fail
        self._check_group_arguments()
        check_argument_types(  # at construction, and again for values from load(path, ...) or custom_objects
            "GRPO",
            dict(
                clip_range=(self.clip_range, "schedule"),
                clip_range_high=(self.clip_range_high, "schedule?"),
                beta=(self.beta, "float"),
                ref_update_interval=(self.ref_update_interval, "int?"),
                ref_mixup_alpha=(self.ref_mixup_alpha, "float"),
                kl_target=(self.kl_target, "float?"),
                kl_horizon=(self.kl_horizon, "float"),
                target_kl=(self.target_kl, "float?"),
                advantage_kwargs=(self.advantage_kwargs, "dict?"),
            ),
        )
        if self.beta < 0 or not np.isfinite(self.beta):
            fail(f"beta must be a finite number >= 0 (0 disables the reference policy), got {self.beta!r}")
        for name in ("clip_range", "clip_range_high"):
            value = getattr(self, name)
            if isinstance(value, (float, int)) and not value > 0:
                fail(f"{name} must be > 0, got {value!r}")
        self._check_choice("loss_type", self.loss_type, LOSS_TYPES)
        self._check_choice("group_loss_scale", self.group_loss_scale, GROUP_LOSS_SCALES)
        self._check_choice("importance_sampling_level", self.importance_sampling_level, IMPORTANCE_SAMPLING_LEVELS)
        check_argument_types(
            "GRPO",
            dict(
                policy_loss=(self.policy_loss, "policy_loss"),
                policy_loss_kwargs=(self.policy_loss_kwargs, "dict?"),
                top_entropy_quantile=(self.top_entropy_quantile, "float?"),
            ),
        )
        if self.importance_sampling_level == "trajectory" and self.policy_loss not in ("clip", "gspo"):
            fail(
                f"importance_sampling_level='trajectory' (deprecated) means policy_loss='gspo', GSPO's trajectory ratio; "
                f"it does not combine with policy_loss={self.policy_loss!r}. Drop importance_sampling_level (a loss "
                "that reads whole trajectories says so itself)."
            )
        self._check_choice("kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        problem = kl_argument_problem(self.beta, self.kl_in_reward, self.kl_target, self.kl_horizon)
        if problem is not None:
            fail(problem)
        quantile = self.top_entropy_quantile
        if quantile is not None and not (0 < quantile <= 1):
            fail(
                f"top_entropy_quantile must be in (0, 1] (the share of each minibatch's steps, by entropy, that the "
                f"policy loss trains on; 0.2 in 'Beyond the 80/20 rule') or None (every step), got {quantile!r}"
            )
        if self.target_kl is not None and not self.target_kl > 0:
            fail(f"target_kl must be > 0 or None, got {self.target_kl!r}")
        if not isinstance(self.branch_common_noise, (bool, np.bool_)):
            fail(f"branch_common_noise must be True or False, got {self.branch_common_noise!r}")
        if self.branch_common_noise:
            if self.branch_every is None:
                fail(
                    "branch_common_noise shares the members' action noise after a branching segment's first step: it "
                    "needs branching groups (set branch_every, e.g. 20)"
                )
            if self.use_sde or not isinstance(self.action_space, (spaces.Box, spaces.Discrete)):
                fail(
                    "branch_common_noise draws actions with shared noise for a diagonal Gaussian policy (Box actions, "
                    f"without gSDE) or a categorical one (Discrete actions); got action space {self.action_space}"
                    + (" with use_sde=True" if self.use_sde else "")
                )
        low, high = self.clip_range, self.clip_range_high
        if isinstance(low, NUMBER_TYPES) and isinstance(high, NUMBER_TYPES) and high < low:
            warnings.warn(
                f"GRPO: clip_range_high ({high!r}) is smaller than clip_range ({low!r}): the upper clip is tighter "
                "than the lower one. DAPO's clip-higher raises the upper clip (clip_range_high > clip_range); swap the "
                "two values if that was meant.",
                stacklevel=3,
            )
        if self.reward_gammas is not None:
            if len(self.reward_gammas) != len(self.reward_functions):
                fail(
                    f"reward_gammas has {len(self.reward_gammas)} entries but reward_functions has "
                    f"{len(self.reward_functions)} ({self.reward_functions}): give one discount per reward function."
                )
            if not all(0.0 <= g <= 1.0 for g in self.reward_gammas):
                fail(f"reward_gammas must all be in [0, 1], got {self.reward_gammas}")

    def _setup_model(self) -> None:
        super()._setup_model()
        self.clip_range = FloatSchedule(self.clip_range)  # type: ignore[assignment]
        if self.clip_range_high is not None:
            self.clip_range_high = FloatSchedule(self.clip_range_high)  # type: ignore[assignment]
        self._setup_estimator()
        self._setup_policy_loss()
        self._check_estimator()

    def _check_estimator(self) -> None:
        """Refuse an estimator that the reward arguments do not fit: ``reward_gammas`` with one that cannot take
        one stream per reward function, ``stream_scale="each"`` without them or with a stream that is no reward
        function's."""
        if self.reward_gammas is not None and not getattr(self._estimator, "accepts_reward_streams", False):
            raise ValueError(
                f"reward_gammas (one discount per reward function) needs an advantage estimator that discounts each "
                f"reward function separately: advantage_estimator='group_step_baseline' (with lam=1), got "
                f"{self.advantage_estimator!r} with {self.advantage_kwargs}. Or drop reward_gammas to discount every "
                "reward with gamma."
            )
        if getattr(self._estimator, "scales_reward_streams", False):
            if self.reward_gammas is None:
                raise ValueError(
                    f"advantage_kwargs {self.advantage_kwargs} scale each reward function's advantage on its own "
                    "(stream_scale='each'), which needs one discount per reward function: give reward_gammas (with "
                    f"reward_functions {self.reward_functions}), or drop stream_scale."
                )
            if self.reward_weights is not None and any(abs(w) != 1.0 for w in self.reward_weights):
                raise ValueError(
                    f"stream_scale='each' divides each reward function's advantage by its own size, so reward_weights "
                    f"{self.reward_weights} would change nothing but their signs: drop reward_weights (or give them as "
                    "1 or -1), or drop stream_scale to weigh the reward functions."
                )
            if self.kl_in_reward:
                raise ValueError(
                    "stream_scale='each' would scale the KL penalty in the rewards (kl_in_reward=True) as a reward "
                    "function of its own, so that beta no longer sets its size: keep the penalty in the loss "
                    "(kl_in_reward=False), or drop stream_scale."
                )

    def _policy_loss_argument(self) -> Any:
        """The policy loss the arguments select: ``policy_loss``, or ``"gspo"`` for the deprecated
        ``importance_sampling_level="trajectory"`` (also in files saved before ``policy_loss`` existed)."""
        if self.importance_sampling_level == "trajectory" and self.policy_loss == "clip":
            return "gspo"
        return self.policy_loss

    def _setup_policy_loss(self) -> None:
        """Build the policy loss from ``policy_loss`` and ``policy_loss_kwargs`` (at construction, and again when a
        model is loaded: the loss holds its options only, and is not saved)."""
        self._policy_loss = get_policy_loss(self._policy_loss_argument(), **(self.policy_loss_kwargs or {}))

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_policy_loss"]

    def _uses_reference(self) -> bool:
        return self.beta > 0  # the KL term's reference

    # ------------------------------------------------------------------ rollouts

    def _has_batch(self) -> bool:
        return super()._has_batch() and bool(np.any(self.rollout_buffer.weights > 0))  # type: ignore[attr-defined]

    def _fill_batch(self, scored: ScoredRollout, rollout_buffer: GroupRolloutBuffer, env: VecEnv) -> dict[str, float] | None:
        """Advantages, loss weights and the batch (:func:`sb3_grpo.grpo.batch.build_batch`), with ``kl_in_reward``
        after the KL penalty of the rewards (its ``train/kl_ref`` and ``train/beta`` returned)."""
        loss_constant = self.loss_constant
        if self.loss_type == "dr_grpo" and self.branch_common_noise:  # every trajectory of the batch is one step long
            loss_constant = 1.0
        elif self.loss_type == "dr_grpo" and loss_constant is None:  # the env's time limit, if it has one
            loss_constant = getattr(env.get_attr("spec", indices=[0])[0], "max_episode_steps", None) or None
        reward_gammas, stats = self.reward_gammas, None
        reference = self._reference_as_asked() if self.kl_in_reward else None
        if reference is not None:  # the KL penalty in the reward (kl_control.penalize_rewards)
            ref_log_prob = reference_log_probs(reference, scored, self.observation_space, self.action_space, self.device)
            scored, kl_ref = penalize_rewards(scored, ref_log_prob, self.beta, self.kl_estimator)
            reward_gammas = None if reward_gammas is None else [*reward_gammas, self.gamma]  # the penalty's stream
            stats = {"train/kl_ref": kl_ref, "train/beta": self.beta}
        self.loss_constant = build_batch(
            scored,
            rollout_buffer,
            estimator=self._estimator,
            gamma=self.gamma,
            group_size=self.group_size,
            reward_gammas=reward_gammas,
            loss_type=self.loss_type,
            loss_constant=None if loss_constant is None else float(loss_constant),
            group_loss_scale=self.group_loss_scale,
            first_steps_only=bool(self.branch_common_noise),
            policy=self.policy,
        )
        for name, key in (("history_explained", "reward_history"), ("state_explained", "state_baseline")):
            explained = getattr(self._estimator, name, None)  # group_step_baseline's fits
            if explained is not None:
                stats = {**(stats or {}), f"train/{key}_explained": explained}
        return stats

    # ------------------------------------------------------------------ update

    def train(self) -> None:
        """Update the policy on the current batch: ``n_epochs`` passes of minibatch gradient steps."""
        eps_low = self._scheduled("clip_range", self.clip_range)  # type: ignore[arg-type]
        eps_high = eps_low if self.clip_range_high is None else self._scheduled("clip_range_high", self.clip_range_high)  # type: ignore[arg-type]
        if not self._begin_update():
            return
        buffer: GroupRolloutBuffer = self.rollout_buffer  # type: ignore[assignment]

        if self.ref_policy is not None:
            buffer.ref_log_prob = buffer.log_prob_under(self.ref_policy)

        policy_loss = self._policy_loss
        beta, kl_in_loss = self.beta, self.ref_policy is not None and not self.kl_in_reward
        pg_losses, kl_refs, entropies, approx_kls = [], [], [], []
        ratio_stats: list[tuple[float, float, float, float]] = []
        loss_stats: dict[str, list[float]] = {}

        def minibatch_loss(batch: GroupRolloutBufferSamples) -> tuple[th.Tensor, float]:
            log_prob, entropy = self.policy.evaluate_actions(batch.observations, batch.actions)
            mask = None
            if self.top_entropy_quantile is not None:
                mask = entropy_mask(-log_prob if entropy is None else entropy, self.top_entropy_quantile)
            outputs = run_policy_loss(
                policy_loss,
                PolicyLossInputs(
                    log_prob=log_prob,
                    old_log_prob=batch.old_log_prob,
                    advantages=batch.advantages,
                    weights=batch.weights if mask is None else batch.weights * mask,
                    trajectory=batch.trajectory,
                    n_trajectories=batch.n_trajectories,
                    clip_range_low=eps_low,
                    clip_range_high=eps_high,
                    ref_log_prob=batch.ref_log_prob if self.ref_policy is not None else None,
                    entropy=entropy,
                ),
            )
            policy_term = outputs.per_step if mask is None else outputs.per_step * mask
            per_step = policy_term
            if kl_in_loss:
                kl_ref = kl_estimate(batch.ref_log_prob - log_prob, self.kl_estimator)  # KL(pi_theta || pi_ref)
                per_step = per_step + beta * kl_ref
                kl_refs.append(float((batch.weights * kl_ref.detach()).sum() / batch.weights.sum().clamp_min(1e-12)))
            if entropy is None:
                entropy = -log_prob
            if self.ent_coef != 0:  # without the bonus, no backward pass through the entropy
                per_step = per_step - self.ent_coef * entropy
            loss = (batch.weights * per_step).sum()

            with th.no_grad():
                weight_sum = batch.weights.sum().clamp_min(1e-12)
                pg_losses.append(float((batch.weights * policy_term).sum() / weight_sum))
                entropies.append(float(entropy.mean()))
                ratio_stats.append(ratio_statistics(outputs.ratio.detach(), batch.advantages, eps_low, eps_high))
                for key, value in outputs.stats.items():
                    if f"train/{key}" in GRPO_TRAIN_KEYS:
                        raise ValueError(
                            f"GRPO: the policy loss {policy_loss_name(policy_loss)!r} returned a statistic named "
                            f"{key!r}, which is one of GRPO's own train/ keys ({', '.join(sorted(GRPO_TRAIN_KEYS))}): "
                            "give it another name."
                        )
                    loss_stats.setdefault(key, []).append(float(value))
                approx_kl = float(kl_estimate(log_prob - batch.old_log_prob, "k3").mean())  # KL(pi_old || pi), as PPO
                approx_kls.append(approx_kl)
            return loss, approx_kl

        by_trajectory = bool(policy_loss.by_trajectory)
        loss, _ = self._train_epochs(
            lambda: buffer.get(self.batch_size, self._np_rng, by_trajectory=by_trajectory), minibatch_loss, self.target_kl
        )

        if approx_kls:
            self._adapt_learning_rate(float(np.mean(approx_kls)))
        self._end_update()
        kl_to_ref = (float(np.mean(kl_refs)) if kl_refs else 0.0) if kl_in_loss else buffer.stats.get("train/kl_ref", 0.0)
        if self.kl_target is not None and self.ref_policy is not None:  # from the KL logged as train/kl_ref
            self.beta = next_beta("GRPO", beta, kl_to_ref, self.kl_target, buffer.n_trajectories, self.kl_horizon)

        for key, values in loss_stats.items():
            self.logger.record(f"train/{key}", float(np.mean(values)))
        self.logger.record("train/policy_gradient_loss", float(np.mean(pg_losses)) if pg_losses else 0.0)
        self.logger.record("train/entropy_loss", -float(np.mean(entropies)) if entropies else 0.0)
        self.logger.record("train/approx_kl", float(np.mean(approx_kls)) if approx_kls else 0.0)
        clip_fraction, clip_low, clip_high, ess = np.mean(ratio_stats, axis=0) if ratio_stats else (0.0, 0.0, 0.0, 1.0)
        self.logger.record("train/clip_fraction", float(clip_fraction))
        self.logger.record("train/clip_fraction_low", float(clip_low))
        self.logger.record("train/clip_fraction_high", float(clip_high))
        self.logger.record("train/importance_ess", float(ess))
        self.logger.record("train/kl_ref", kl_to_ref)
        if kl_in_loss:  # with kl_in_reward, train/beta is logged with the rollout's statistics
            self.logger.record("train/beta", beta)
        self.logger.record("train/loss", float(loss.item()))
        self.logger.record("train/clip_range", eps_low)
        if self.clip_range_high is not None:
            self.logger.record("train/clip_range_high", eps_high)
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        if self.log_std_max is not None:
            self.logger.record("train/log_std_max", getattr(self, "_log_std_bound", float("nan")))
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
