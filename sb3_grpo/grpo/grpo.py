"""GRPO: critic-free group relative policy optimisation for any Gymnasium env (see :class:`GRPO`)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import FloatSchedule, LinearSchedule, obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from sb3_grpo.common.advantages import AdvantageInputs, group_index, grouped_mean_std, run_estimator
from sb3_grpo.common.arguments import check_argument_types
from sb3_grpo.common.buffers import GroupRolloutBuffer
from sb3_grpo.common.env_hooks import INFO_KEY, base_vec_env, install_group_reset, is_group_reset_class
from sb3_grpo.common.group_sampling import GroupScheduler
from sb3_grpo.common.kl import kl_estimate
from sb3_grpo.common.rewards import RewardCombiner, Trajectory
from sb3_grpo.common.rollout_checks import observation_moment
from sb3_grpo.common.save_util import SafeSaveMixin
from sb3_grpo.common.utils import GROUP_PROVIDES, ClampedProgressMixin, make_advantage_estimator
from sb3_grpo.grpo.policies import ActorPolicy, CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_grpo.plugins import get_reward_function

SelfGRPO = TypeVar("SelfGRPO", bound="GRPO")

LOSS_TYPES = ("grpo", "bnpo", "dapo", "dr_grpo")
GROUP_LOSS_SCALES = ("mean", "sqrt")
IMPORTANCE_SAMPLING_LEVELS = ("step", "trajectory")
BRANCH_PIVOTS = ("any", "alive")
NUMBER_TYPES = (int, float, np.integer, np.floating)


def trajectory_loss_weights(
    lengths: np.ndarray,
    keep: np.ndarray,
    loss_type: str,
    group_size: int,
    group_loss_scale: str = "mean",
    loss_constant: float | None = None,
) -> np.ndarray:
    """The loss weight of every step of each trajectory, such that the batch loss is ``sum_steps w * loss_step``.

    With ``M`` kept trajectories, ``N`` kept steps and ``L_i`` the length of trajectory ``i``: ``"grpo"``:
    ``1 / (M L_i)``; ``"bnpo"``/``"dapo"``: ``1 / N``; ``"dr_grpo"``: ``1 / (M C)`` with ``C = loss_constant``.
    ``group_loss_scale="sqrt"`` multiplies by ``sqrt(G)`` (a group's summed loss is divided by ``sqrt(G)``
    instead of ``G``). Dropped trajectories (``keep`` False) weigh 0.

    :param lengths: ``(M_all,)`` trajectory lengths.
    :param keep: ``(M_all,)`` bool, trajectories that enter the loss.
    :return: ``(M_all,)`` weight of each step of each trajectory.
    """
    lengths = np.asarray(lengths, dtype=np.float64)
    keep = np.asarray(keep, dtype=bool)
    weights = np.zeros(len(lengths))
    n_kept = int(keep.sum())
    if n_kept == 0:
        return weights
    if loss_type == "grpo":
        weights[keep] = 1.0 / (n_kept * lengths[keep])
    elif loss_type in ("bnpo", "dapo"):
        weights[keep] = 1.0 / lengths[keep].sum()
    elif loss_type == "dr_grpo":
        if loss_constant is None or not loss_constant > 0:
            raise ValueError(f"loss_type='dr_grpo' needs a positive loss_constant, got {loss_constant!r}")
        weights[keep] = 1.0 / (n_kept * loss_constant)
    else:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if group_loss_scale == "sqrt":
        weights *= np.sqrt(group_size)
    return weights


def grpo_step_loss(
    log_prob: th.Tensor,
    old_log_prob: th.Tensor,
    advantages: th.Tensor,
    eps_low: float,
    eps_high: float,
    beta: float = 0.0,
    ref_log_prob: th.Tensor | None = None,
    trajectory: th.Tensor | None = None,
    n_trajectories: int = 0,
) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor, th.Tensor | None]:
    """GRPO's per-step loss ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) + beta * KL_k3(pi_theta || pi_ref)``.

    :param log_prob: ``(m,)`` log pi_theta(a_t | s_t) (differentiable).
    :param old_log_prob: ``(m,)`` log-probabilities under the behaviour policy.
    :param advantages: ``(m,)``.
    :param ref_log_prob: ``(m,)`` log-probabilities under the reference policy (``None``: no KL term).
    :param trajectory: ``(m,)`` trajectory index of each step for trajectory-level ratios
        ``r_i = exp(mean_t log r_t)`` (GSPO); ``None``: one ratio per step.
    :return: ``(per_step_loss, surrogate, ratio, log_ratio, kl_ref)``, each ``(m,)`` (``kl_ref`` ``None`` without
        a reference).
    """
    log_ratio = log_prob - old_log_prob
    if trajectory is not None:
        counts = th.bincount(trajectory, minlength=n_trajectories).to(log_ratio.dtype)
        sums = th.zeros(n_trajectories, device=log_ratio.device, dtype=log_ratio.dtype).index_add(0, trajectory, log_ratio)
        ratio = th.exp(sums / counts.clamp_min(1.0))[trajectory]
    else:
        ratio = th.exp(log_ratio)
    surrogate = th.min(advantages * ratio, advantages * th.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high))
    per_step = -surrogate
    kl_ref = None
    if ref_log_prob is not None:
        # k3 estimator of KL(pi_theta || pi_ref): r - log r - 1 with r = pi_ref / pi_theta.
        kl_ref = kl_estimate(ref_log_prob - log_prob, "k3")
        per_step = per_step + beta * kl_ref
    return per_step, surrogate, ratio, log_ratio, kl_ref


def check_finite_observations(obs: Any, step: Any, dones: Any = None) -> None:
    """Raise a ValueError naming the slot (and the episode step) of the first non-finite observation.

    :param step: per slot, the step of its episode just taken (0: ``obs`` comes from ``reset()``).
    :param dones: per slot, whether the episode ended with this step (``obs`` is then the next episode's first).
    """
    parts = obs.items() if isinstance(obs, dict) else [(None, obs)]
    for key, value in parts:
        value = np.asarray(value)
        if not np.issubdtype(value.dtype, np.floating):
            continue
        bad = ~np.isfinite(value.reshape(value.shape[0], -1)).all(axis=1)
        if bad.any():
            slot = int(np.flatnonzero(bad)[0])
            where = "" if key is None else f" (key {key!r})"
            moment = observation_moment(int(step[slot]), dones is not None and bool(dones[slot]))
            raise ValueError(
                f"Env slot {slot} returned a non-finite observation{where} (NaN or inf) {moment}. Fix the env, or find "
                "the source with SB3's VecCheckNan wrapper."
            )


class _StepRecord:
    """The per-step arrays of one rollout, time-major (one entry per VecEnv step), for :meth:`GRPO._build_batch`."""

    def __init__(self) -> None:
        self.obs: list[Any] = []
        self.actions: list[np.ndarray] = []
        self.log_prob: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []
        self.trajectory: list[np.ndarray] = []  # trajectory id running in each slot (-1: idle)
        self.infos: list[list[dict]] = []
        self.n_env_steps = 0

    def add(
        self, obs: Any, actions: np.ndarray, log_prob: np.ndarray, rewards: np.ndarray, active: np.ndarray, infos: Any
    ) -> None:
        # copies: a VecEnv may reuse its observation buffer
        self.obs.append({k: np.copy(v) for k, v in obs.items()} if isinstance(obs, dict) else np.copy(obs))
        self.actions.append(actions)
        self.log_prob.append(log_prob)
        self.rewards.append(np.asarray(rewards, dtype=np.float64).copy())
        self.trajectory.append(active.copy())
        self.infos.append(infos)
        self.n_env_steps += len(active)


class NonReproducibleResetError(RuntimeError):
    """The env's ``reset(seed=...)`` gave different first observations for the same seed."""


def describe_env(env: VecEnv) -> str:
    """The env in a VecEnv, for messages: its registered id, else the class of the innermost env."""
    try:
        spec = env.get_attr("spec", indices=[0])[0]
        if getattr(spec, "id", None):
            return repr(spec.id)
        cls = type(env.get_attr("unwrapped", indices=[0])[0])
    except Exception:  # an env that cannot be sent over a SubprocVecEnv pipe: its outermost class
        try:
            cls = env.get_attr("__class__", indices=[0])[0]
        except Exception:
            return "of unknown class"
    # the env's own class, not the subclass that this package's hooks swapped in
    cls = next((c for c in cls.__mro__ if not c.__module__.startswith("sb3_grpo.common.")), cls)
    return f"of class {cls.__module__}.{cls.__qualname__}"


class GRPO(SafeSaveMixin, ClampedProgressMixin, OnPolicyAlgorithm):
    """
    Group Relative Policy Optimisation (Shao et al. 2024, DeepSeekMath), for any Gymnasium env, without a critic.

    Each rollout runs groups of ``group_size`` trajectories; the members of a group start from the same state
    (every slot of the VecEnv is reset with the group's seed, through whatever wrappers are stacked on it). Each
    finished trajectory is scored by the reward functions, and the advantage estimator compares it with its group
    (default ``group_auto``: where every trajectory is rewarded on its last step only, DeepSeekMath's
    ``group_zscore``, ``(R_i - mean_group) / std_group`` on every step; otherwise ``group_step_baseline``, at every
    step the member's discounted reward-to-go minus the mean of the other members' at the same step, divided by the
    batch's standard deviation). The loss per step is the clipped
    surrogate ``min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)`` with ``r = pi_theta / pi_old``, minus
    ``beta * KL_k3(pi_theta || pi_ref)`` with ``KL_k3 = pi_ref/pi_theta - log(pi_ref/pi_theta) - 1``, averaged as
    ``loss_type`` says.

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
        group is run, so the rollout holds ``groups_per_rollout * group_size`` whole trajectories).
    :param group_size: trajectories per group (G >= 2).
    :param batch_size: minibatch size in steps (``None``: the whole batch, one gradient step per epoch).
    :param n_epochs: passes over each batch (mu in the GRPO paper).
    :param gamma: discount factor, used by discounted reward functions and estimators.
    :param clip_range: lower clipping parameter eps_low (and eps_high unless ``clip_range_high`` is given);
        a float or a schedule.
    :param clip_range_high: upper clipping parameter eps_high (DAPO's "clip-higher"), ``None`` = ``clip_range``.
    :param beta: coefficient of the KL penalty to the reference policy. ``0`` skips the reference policy entirely
        (no copy, no forward pass).
    :param ref_update_interval: ``None`` keeps the initial policy as reference; ``k`` copies the current policy
        into the reference every ``k`` updates (one update = one call of ``train``).
    :param loss_type: how the per-step losses are averaged: ``"grpo"`` (mean over each trajectory's steps, then
        over trajectories), ``"bnpo"`` / ``"dapo"`` (mean over all steps of the batch), ``"dr_grpo"`` (sum over
        steps divided by ``M * loss_constant``, with M trajectories).
    :param loss_constant: the constant of ``"dr_grpo"`` (default: the env's ``max_episode_steps``, else the longest
        trajectory of the first batch).
    :param group_loss_scale: ``"mean"`` divides each group's summed loss by G; ``"sqrt"`` by sqrt(G) (so the
        signal of large groups does not shrink).
    :param importance_sampling_level: ``"step"`` (a ratio per step) or ``"trajectory"`` (GSPO: one ratio per
        trajectory, ``exp(mean_t log r_t)``; minibatches then hold whole trajectories).
    :param mask_truncated: drop trajectories cut by a time limit from the loss (they still count in their
        group's statistics).
    :param reward_functions: names of registered reward functions or callables ``f(trajectory) -> float or (L,)``.
    :param reward_weights: one weight per reward function (default: all 1).
    :param reward_aggregation: ``"sum_then_normalize"`` or ``"normalize_then_sum"`` (see
        :class:`sb3_grpo.common.rewards.RewardCombiner`).
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
        measured in ``benchmarks/default_estimator.py`` (table in the GRPO module docs, "Why this default").
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
        to whole segments (a curriculum of early-episode states; it scored higher on HalfCheetah, see BENCHMARKS.md).
    :param branch_pivot: which member's state the next segment branches from. ``"any"`` (default): a member drawn at
        random before the segment; if its episode ended within the segment, the block starts a new group from a
        fresh reset. ``"alive"``: if that member's episode ended, a member drawn at random among those still running
        (each survivor equally likely); a new group only when every member's episode ended. On envs whose episodes
        end early while learning (Hopper), ``"any"`` keeps restarting from reset and rarely trains on later states.
    :param verify_group_starts: check that the members of every group saw the same first observation and raise
        :class:`NonReproducibleResetError` if not. Set ``False`` only for envs whose seeded resets are knowingly
        not reproducible (the group baseline then compares different start states).
    :param max_trajectory_length: a trajectory longer than this raises an error (an env that never ends).
    :param use_sde: generalised state-dependent exploration (gSDE, Box actions): each env slot explores with its own
        noise matrix, so a member's exploration changes smoothly with the state (see :class:`ActorPolicy`).
    :param sde_sample_freq: with gSDE, draw new noise matrices for every slot every ``sde_sample_freq`` steps of a
        rollout (as SB3); ``-1`` (default): one noise matrix per trajectory, drawn when it starts. Measured on
        Pendulum-v1 (BENCHMARKS.md): every 4 steps made GRPO as sample-efficient as SB3 PPO (-144 at 50k steps,
        against -327 without gSDE), while one matrix per trajectory was slower than no gSDE; on HalfCheetah-v5 and
        Hopper-v5 gSDE did not help.
    :param log_std_max: an upper bound on the Gaussian policy's log standard deviation (Box actions), applied to the
        policy's ``log_std`` parameter before every rollout: a number, a schedule of the remaining progress (1 to 0),
        or a pair ``(start, end)`` for a bound that moves linearly from ``start`` to ``end`` over training (what a
        YAML zoo entry can express). ``None`` (default): no bound. The entropy bonus and the policy gradient still
        move ``log_std`` during an update; the bound holds for every rollout, so a falling bound brings the late
        stochastic policy closer to the deterministic one that evaluation runs. With gSDE it bounds the log standard
        deviation of the exploration matrix's entries. Measured on Hopper-v5 (BENCHMARKS.md): the entry's
        deterministic policy stood still while its noisy training policy wandered forward; with a bound falling to
        -4, 42 of 50 seeds end above 1000 (36 without), but one policy still relied on the last of its noise (it
        falls after ~200 steps deterministically and stands with noise of std 0.02).
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

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    policy: ActorPolicy  # type: ignore[assignment]
    #: Branching groups: (env id, state to branch from per block) at the end of the last rollout (saved with the model).
    _branch_states: tuple[str, list[Any]] | None = None
    #: ``num_timesteps`` past which this ``learn`` has run twice its budget (warned once; see ``_warn_overshoot``).
    _overshoot_warn_at: int | None = None

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
        loss_type: str = "bnpo",
        loss_constant: float | None = None,
        group_loss_scale: str = "mean",
        importance_sampling_level: str = "step",
        mask_truncated: bool = False,
        reward_functions: Sequence[str | Callable] | str | Callable = ("episodic_return",),
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
        verify_group_starts: bool = True,
        max_trajectory_length: int = 100_000,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        log_std_max: float | Schedule | Sequence[float] | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
    ):
        check_argument_types(
            "GRPO",
            dict(
                learning_rate=(learning_rate, "schedule"),
                n_steps=(n_steps, "int"),
                groups_per_rollout=(groups_per_rollout, "int?"),
                group_size=(group_size, "int"),
                batch_size=(batch_size, "int?"),
                n_epochs=(n_epochs, "int"),
                gamma=(gamma, "float"),
                clip_range=(clip_range, "schedule"),
                clip_range_high=(clip_range_high, "schedule?"),
                beta=(beta, "float"),
                ref_update_interval=(ref_update_interval, "int?"),
                loss_constant=(loss_constant, "float?"),
                ent_coef=(ent_coef, "float"),
                max_grad_norm=(max_grad_norm, "float"),
                target_kl=(target_kl, "float?"),
                branch_every=(branch_every, "int?"),
                max_trajectory_length=(max_trajectory_length, "int"),
                sde_sample_freq=(sde_sample_freq, "int"),
                stats_window_size=(stats_window_size, "int"),
            ),
        )
        super().__init__(
            policy,  # type: ignore[arg-type]  # SB3 types on-policy policies as ActorCriticPolicy; GRPO's is actor only
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=1.0,
            ent_coef=ent_coef,
            vf_coef=0.0,
            max_grad_norm=max_grad_norm,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
            supported_action_spaces=(spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
        )
        self.groups_per_rollout = groups_per_rollout
        self.group_size = group_size
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.clip_range = clip_range
        self.clip_range_high = clip_range_high
        self.beta = beta
        self.ref_update_interval = ref_update_interval
        self.loss_type = loss_type
        self.loss_constant = loss_constant
        self.group_loss_scale = group_loss_scale
        self.importance_sampling_level = importance_sampling_level
        self.mask_truncated = mask_truncated
        if isinstance(reward_functions, str) or callable(reward_functions):
            reward_functions = [reward_functions]  # type: ignore[list-item]
        self.reward_functions = list(reward_functions)  # type: ignore[arg-type]
        self.reward_weights = None if reward_weights is None else [float(w) for w in reward_weights]
        self.reward_aggregation = reward_aggregation
        self.reward_gammas = None if reward_gammas is None else [float(g) for g in reward_gammas]
        self.advantage_estimator = advantage_estimator
        self.advantage_kwargs = dict(advantage_kwargs or {})
        self.target_kl = target_kl
        self.branch_every = branch_every
        self.branch_pivot = branch_pivot
        self.branch_carry_over = branch_carry_over
        self.verify_group_starts = verify_group_starts
        self.max_trajectory_length = max_trajectory_length
        self.log_std_max = log_std_max
        self._check_arguments()
        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ set-up

    def _check_arguments(self) -> None:
        def fail(message: str) -> None:
            raise ValueError(message)

        if not isinstance(self.group_size, (int, np.integer)) or self.group_size < 2:
            fail(f"group_size must be an integer >= 2 (trajectories are compared within a group), got {self.group_size!r}")
        if self.groups_per_rollout is not None and self.groups_per_rollout < 1:
            fail(f"groups_per_rollout must be >= 1 or None, got {self.groups_per_rollout!r}")
        if self.n_steps < 1:
            fail(f"n_steps must be >= 1, got {self.n_steps!r}")
        if not 0 <= self.gamma <= 1:
            fail(f"gamma (the discount factor) must be in [0, 1], got {self.gamma!r}")
        if self.batch_size is not None and self.batch_size < 1:
            fail(f"batch_size must be >= 1 or None (whole batch), got {self.batch_size!r}")
        if self.n_epochs < 1:
            fail(f"n_epochs must be >= 1, got {self.n_epochs!r}")
        if self.beta < 0 or not np.isfinite(self.beta):
            fail(f"beta must be a finite number >= 0 (0 disables the reference policy), got {self.beta!r}")
        if self.ref_update_interval is not None and self.ref_update_interval < 1:
            fail(f"ref_update_interval must be None (keep the initial policy) or >= 1, got {self.ref_update_interval!r}")
        for name in ("clip_range", "clip_range_high"):
            value = getattr(self, name)
            if isinstance(value, (float, int)) and not value > 0:
                fail(f"{name} must be > 0, got {value!r}")
        if self.loss_type not in LOSS_TYPES:
            fail(f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        if self.loss_constant is not None and not self.loss_constant > 0:
            fail(f"loss_constant must be > 0 or None, got {self.loss_constant!r}")
        if self.group_loss_scale not in GROUP_LOSS_SCALES:
            fail(f"group_loss_scale must be one of {GROUP_LOSS_SCALES}, got {self.group_loss_scale!r}")
        if self.importance_sampling_level not in IMPORTANCE_SAMPLING_LEVELS:
            fail(
                f"importance_sampling_level must be one of {IMPORTANCE_SAMPLING_LEVELS}, "
                f"got {self.importance_sampling_level!r}"
            )
        if self.target_kl is not None and not self.target_kl > 0:
            fail(f"target_kl must be > 0 or None, got {self.target_kl!r}")
        if not isinstance(self.sde_sample_freq, (int, np.integer)) or not (
            self.sde_sample_freq == -1 or self.sde_sample_freq > 0
        ):
            fail(
                f"sde_sample_freq must be -1 (one gSDE noise matrix per trajectory) or a number of steps > 0, "
                f"got {self.sde_sample_freq!r}"
            )
        if self.max_trajectory_length < 1:
            fail(f"max_trajectory_length must be >= 1, got {self.max_trajectory_length!r}")
        if self.ent_coef < 0:
            fail(f"ent_coef must be >= 0, got {self.ent_coef!r}")
        if not (self.max_grad_norm > 0 and np.isfinite(self.max_grad_norm)):
            fail(
                f"max_grad_norm (the largest gradient norm, clipping) must be a finite number > 0, got "
                f"{self.max_grad_norm!r} (a negative norm turns every gradient step around, 0 stops training)."
            )
        low, high = self.clip_range, self.clip_range_high
        if isinstance(low, NUMBER_TYPES) and isinstance(high, NUMBER_TYPES) and high < low:
            warnings.warn(
                f"GRPO: clip_range_high ({high!r}) is smaller than clip_range ({low!r}): the upper clip is tighter "
                "than the lower one. DAPO's clip-higher raises the upper clip (clip_range_high > clip_range); swap the "
                "two values if that was meant.",
                stacklevel=3,
            )
        observation_space = getattr(self, "observation_space", None)
        if observation_space is not None and not isinstance(
            observation_space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Dict)
        ):
            raise NotImplementedError(
                f"GRPO: {observation_space} observation space is not supported (as in SB3, the observation space must "
                "be a Box, Discrete, MultiDiscrete, MultiBinary or Dict). Use a Dict observation space, or flatten the "
                "observation with gymnasium.wrappers.FlattenObservation."
            )
        if self.reward_gammas is not None:
            if len(self.reward_gammas) != len(self.reward_functions):
                fail(
                    f"reward_gammas has {len(self.reward_gammas)} entries but reward_functions has "
                    f"{len(self.reward_functions)} ({self.reward_functions}): give one discount per reward function."
                )
            if not all(0.0 <= g <= 1.0 for g in self.reward_gammas):
                fail(f"reward_gammas must all be in [0, 1], got {self.reward_gammas}")
        bound = self.log_std_max
        if bound is not None and not callable(bound):
            pair = isinstance(bound, (list, tuple)) and len(bound) == 2 and all(isinstance(v, NUMBER_TYPES) for v in bound)
            if not (isinstance(bound, NUMBER_TYPES) or pair):
                fail(
                    f"log_std_max must be None, a number, a schedule of the remaining progress or a pair (start, end) "
                    f"for a linear schedule, got {bound!r}"
                )
            if not np.all(np.isfinite(np.asarray(bound, dtype=np.float64))):
                fail(f"log_std_max must be finite, got {bound!r}")
        if self.branch_pivot not in BRANCH_PIVOTS:
            fail(f"branch_pivot must be one of {BRANCH_PIVOTS}, got {self.branch_pivot!r}")
        if self.branch_every is not None:
            if self.branch_every < 1:
                fail(f"branch_every must be >= 1 or None, got {self.branch_every!r}")
            if getattr(self, "n_envs", None) and self.n_envs % self.group_size != 0:
                fail(
                    f"branch_every needs n_envs to be a multiple of group_size (each block of group_size env slots runs "
                    f"one group in lockstep), got n_envs={self.n_envs}, group_size={self.group_size}: "
                    f"use make_vec_env(..., n_envs={self.group_size * max(1, self.n_envs // self.group_size)})."
                )

    def _setup_model(self) -> None:
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        self.policy = self.policy_class(  # type: ignore[assignment]
            self.observation_space, self.action_space, self.lr_schedule, use_sde=self.use_sde, **self.policy_kwargs
        )
        self.policy = self.policy.to(self.device)
        self._maybe_recommend_cpu()
        self.ref_policy: ActorPolicy | None = None
        if self.beta > 0:
            self.ref_policy = self._frozen_copy(self.policy)
        if self.log_std_max is not None:
            log_std = getattr(self.policy, "log_std", None)
            if not isinstance(self.action_space, spaces.Box) or not isinstance(log_std, th.nn.Parameter):
                raise ValueError(
                    f"log_std_max bounds the Gaussian policy's log standard deviation, which needs a Box action space; "
                    f"this env's action space is {self.action_space}. Drop log_std_max."
                )
            if not callable(self.log_std_max) and not isinstance(self.log_std_max, NUMBER_TYPES):
                start, end = (float(v) for v in self.log_std_max)  # type: ignore[union-attr]
                self.log_std_max = LinearSchedule(start, end, 1.0)
            self.log_std_max = FloatSchedule(self.log_std_max)  # type: ignore[arg-type]
        self.clip_range = FloatSchedule(self.clip_range)  # type: ignore[assignment]
        if self.clip_range_high is not None:
            self.clip_range_high = FloatSchedule(self.clip_range_high)  # type: ignore[assignment]
        # Resolving now makes unknown names and misfits fail at construction, before any env step.
        if getattr(self, "_estimator", None) is None:  # a loaded model keeps its (possibly stateful) estimator
            self._estimator = make_advantage_estimator("GRPO", self.advantage_estimator, self.advantage_kwargs, GROUP_PROVIDES)
        if self.reward_gammas is not None and not getattr(self._estimator, "accepts_reward_streams", False):
            raise ValueError(
                f"reward_gammas (one discount per reward function) needs an advantage estimator that discounts each "
                f"reward function separately: advantage_estimator='group_step_baseline' (with lam=1), got "
                f"{self.advantage_estimator!r} with {self.advantage_kwargs}. Or drop reward_gammas to discount every "
                "reward with gamma."
            )
        functions = [
            (f if isinstance(f, str) else getattr(f, "__name__", repr(f)), get_reward_function(f))
            for f in self.reward_functions
        ]
        self._reward_combiner = RewardCombiner(functions, self.reward_weights, self.reward_aggregation)
        self.rollout_buffer = GroupRolloutBuffer(self.observation_space, self.action_space, self.device)  # type: ignore[assignment]
        # Reproducible group seeds and minibatch order, saved with the model (exact resume).
        if not hasattr(self, "_seed_root"):
            self._seed_root = int(self.seed) if self.seed is not None else int(np.random.SeedSequence().generate_state(1)[0])
            self._group_counter = 0
            self._np_rng = np.random.default_rng(np.random.SeedSequence([self._seed_root, 1]))
        self._rollout_start: dict[str, Any] | None = None
        self._stats: dict[str, float] = {}

    @staticmethod
    def _frozen_copy(policy: ActorPolicy) -> ActorPolicy:
        ref = copy.deepcopy(policy)
        ref.optimizer = None  # type: ignore[assignment]
        ref.set_training_mode(False)
        for param in ref.parameters():
            param.requires_grad_(False)
        return ref

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        names = ["policy", "policy.optimizer"]
        if self.beta > 0:
            names.append("ref_policy")
        return names, []

    def _excluded_save_params(self) -> list[str]:
        return [
            *super()._excluded_save_params(),
            "ref_policy",
            "_hooked_env",
            "_stats",
            "_rollout_start",
            "_snapshots_checked",
            "_overshoot_warn_at",
        ]

    # ------------------------------------------------------------------ rollouts

    def _install_hooks(self, env: VecEnv) -> None:
        if getattr(self, "_hooked_env", None) is env and all(is_group_reset_class(c) for c in env.get_attr("__class__")):
            return
        install_group_reset(env)
        self._hooked_env = env

    def _schedule(self, env: VecEnv, slot: int, assignment: Any) -> None:
        env.env_method("sb3_grpo_schedule_reset", assignment.seed, assignment.trajectory, indices=[slot])

    def _reset_record(self, base: VecEnv, slot: int, expected: int) -> str:
        record = base.reset_infos[slot].get(INFO_KEY) if base.reset_infos[slot] else None
        if record is None or record[0] != expected:
            raise RuntimeError(
                f"GRPO scheduled trajectory {expected} in env slot {slot}, but the slot's reset info reports "
                f"{record!r}. Something between the VecEnv and the env (a custom VecEnv or a wrapper that resets on its "
                "own) bypassed the seeded reset; use DummyVecEnv or SubprocVecEnv with standard wrappers."
            )
        return record[2]

    def _check_group_start(
        self, env: VecEnv, starts: dict[int, tuple[int, str]], group: int, trajectory: int, digest: str, restored: bool = False
    ) -> None:
        """Raise :class:`NonReproducibleResetError` as soon as a member of a group starts from another observation than
        the group's first member (``starts``: group -> (first member's trajectory, its start digest), filled here)."""
        if not self.verify_group_starts:
            return
        first_trajectory, first_digest = starts.setdefault(group, (trajectory, digest))
        if digest == first_digest:
            return
        name = describe_env(env)
        where = f"(env {name}, group {group}: trajectories {first_trajectory} and {trajectory})"
        if restored:
            raise NonReproducibleResetError(
                f"Members of a GRPO branching group were restored from the same state snapshot but started from "
                f"different observations {where}: the env's state snapshotter does not restore everything the "
                "observation depends on. Fix the snapshotter registered for this env (register_state_snapshots), "
                "or pass verify_group_starts=False to train anyway."
            )
        raise NonReproducibleResetError(
            f"Members of a GRPO group reset with the same seed but started from different observations {where}: "
            "the env's reset(seed=...) is not reproducible, so a group baseline would compare different start states. "
            "Make it deterministic: in reset(), call super().reset(seed=seed) first and draw everything random from "
            "self.np_random (not from np.random, random or a generator of its own); if reset() samples a space "
            "(self.observation_space.sample(), self.action_space.sample()), seed that space from the reset seed too: "
            "self.observation_space.seed(seed) when seed is not None. Or pass verify_group_starts=False to train "
            "anyway (the members of a group then start from different states)."
        )

    @staticmethod
    def _env_id(env: VecEnv) -> str:
        spec = env.get_attr("spec", indices=[0])[0]
        return str(getattr(spec, "id", None) or env.get_attr("unwrapped", indices=[0])[0].__class__.__qualname__)

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        # A fresh run (reset_num_timesteps=True, SB3's default) starts new groups; a continued one carries on the
        # branching groups' episodes where the previous rollout left them.
        if reset_num_timesteps:
            self._branch_states = None
        setup = super()._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)
        # Warn when whole groups of whole episodes take the run past twice what was asked for, or past twice one rollout
        # of n_steps * n_envs steps (what SB3's PPO would run for a budget smaller than one rollout).
        requested = self._total_timesteps - self.num_timesteps
        nominal = 0 if self.groups_per_rollout is not None else self.n_steps * self.n_envs
        self._overshoot_warn_at = self.num_timesteps + 2 * max(requested, nominal) if requested > 0 else None
        return setup

    def _warn_overshoot(self, n_envs: int) -> None:
        """Say, once per ``learn``, that whole groups of whole episodes take the run past twice its budget."""
        start = self._rollout_start["num_timesteps"] if self._rollout_start else self.num_timesteps
        if self.groups_per_rollout is not None:
            rule = f"groups_per_rollout={self.groups_per_rollout} groups of group_size={self.group_size} whole episodes"
        else:
            minimum = -(-2 * n_envs // self.group_size)
            rule = (
                f"groups of group_size={self.group_size} whole episodes until n_steps * n_envs = {self.n_steps} * "
                f"{n_envs} steps are recorded, and at least {minimum} groups with n_envs={n_envs}"
            )
        warnings.warn(
            f"GRPO: learn(total_timesteps={self._total_timesteps:,}) will run more than twice the steps asked for: "
            f"this rollout alone has run {self.num_timesteps - start:,} env steps so far, because a rollout runs {rule}. "
            "For smaller rollouts on long episodes set groups_per_rollout (e.g. 1), a smaller group_size or fewer "
            "envs (n_envs); or raise total_timesteps.",
            stacklevel=2,
        )
        self._overshoot_warn_at = None

    def _begin_rollout(self) -> None:
        """Snapshot what a checkpoint taken during this rollout must store to redo it exactly (see :meth:`save`),
        then reseed torch's generator from the model's own, so the rollout's actions depend on saved state only."""
        self._rollout_start = {
            "num_timesteps": self.num_timesteps,
            "_group_counter": self._group_counter,
            "_np_rng": copy.deepcopy(self._np_rng),
            "_branch_states": self._branch_states,
        }
        th.manual_seed(int(self._np_rng.integers(2**63 - 1)))
        if self.log_std_max is not None:
            bound = self.log_std_max(self._current_progress_remaining)  # type: ignore[operator]
            with th.no_grad():
                self.policy.log_std.clamp_(max=bound)
            self._log_std_bound = bound

    def _raw_obs(self, obs: Any) -> Any:
        """The env's own observations (under a VecNormalize, before normalisation, which clips an inf to a number)."""
        vec_normalize = self._vec_normalize_env
        return vec_normalize.old_obs if vec_normalize is not None else obs

    def _env_step(
        self, env: VecEnv, obs: Any, callback: BaseCallback, record: _StepRecord, active: np.ndarray, episode_step: np.ndarray
    ) -> tuple[Any, np.ndarray, Any] | None:
        """Act in every slot, step the VecEnv and record the step (``None`` if a callback asked to stop).

        :param episode_step: the step index each slot reaches with this step (for error messages).
        :return: ``(new_obs, dones, infos)``.
        """
        if self.use_sde and self.sde_sample_freq > 0 and record.n_env_steps // env.num_envs % self.sde_sample_freq == 0:
            self.policy.reset_noise(env.num_envs)
        with th.no_grad():
            actions_t, log_prob_t = self.policy(obs_as_tensor(obs, self.device))  # type: ignore[arg-type]
        actions = actions_t.cpu().numpy()
        clipped = actions
        if isinstance(self.action_space, spaces.Box):
            if self.policy.squash_output:  # squashed into [-1, 1] (gSDE): rescale to the env's bounds, as SB3's PPO
                clipped = self.policy.unscale_action(actions)
            else:
                clipped = np.clip(actions, self.action_space.low, self.action_space.high)
        new_obs, rewards, dones, infos = env.step(clipped)
        self.num_timesteps += env.num_envs
        if self._overshoot_warn_at is not None and self.num_timesteps > self._overshoot_warn_at:
            self._warn_overshoot(env.num_envs)
        callback.update_locals(locals())
        if not callback.on_step():
            return None
        self._update_info_buffer(infos, dones)
        vec_normalize = self._vec_normalize_env
        raw_rewards = vec_normalize.get_original_reward() if vec_normalize is not None else rewards
        running = active >= 0
        if not np.all(np.isfinite(raw_rewards[running])):
            slot = int(np.flatnonzero(running & ~np.isfinite(raw_rewards))[0])
            raise ValueError(
                f"Env slot {slot} returned a non-finite reward ({raw_rewards[slot]!r}) at step {int(episode_step[slot])} of "
                "its episode. Fix the env (or wrap it to clip/replace such rewards)."
            )
        check_finite_observations(self._raw_obs(new_obs), episode_step, dones)
        record.add(obs, actions, log_prob_t.cpu().numpy(), raw_rewards, active, infos)
        return new_obs, dones, infos

    def collect_rollouts(  # type: ignore[override]
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: GroupRolloutBuffer, n_rollout_steps: int
    ) -> bool:
        """Run whole groups of trajectories and build the training batch (see :mod:`sb3_grpo.common.group_sampling`).

        :return: ``False`` if a callback asked to stop training (the partial rollout is then discarded).
        """
        assert self._last_obs is not None, "No previous observation was provided"
        self._install_hooks(env)
        if self.branch_every is not None:
            return self._collect_branching(env, callback, rollout_buffer, n_rollout_steps)
        self.policy.set_training_mode(False)
        n_envs = env.num_envs
        base = base_vec_env(env)

        self._begin_rollout()
        scheduler = GroupScheduler(
            self.group_size,
            self._seed_root,
            self._group_counter,
            target_steps=None if self.groups_per_rollout else n_rollout_steps * n_envs,
            max_groups=self.groups_per_rollout,
        )
        callback.on_rollout_start()

        active = np.full(n_envs, -1, dtype=np.int64)  # trajectory running in each slot (-1: idle)
        reserved: list[Any] = [None] * n_envs  # the trajectory each slot starts next
        lengths = np.zeros(n_envs, dtype=np.int64)
        group_of: dict[int, int] = {}
        digests: dict[int, str] = {}
        ends: dict[int, tuple[bool, bool]] = {}
        recorded = 0

        for slot in range(n_envs):
            assignment = scheduler.next(recorded)
            if assignment is None:
                env.env_method("sb3_grpo_schedule_reset", None, -1, indices=[slot])
                continue
            self._schedule(env, slot, assignment)
            active[slot] = assignment.trajectory
            group_of[assignment.trajectory] = assignment.group
        obs = env.reset()
        check_finite_observations(self._raw_obs(obs), np.zeros(n_envs, dtype=np.int64))
        if self.use_sde:
            self.policy.reset_noise(n_envs)
        starts: dict[int, tuple[int, str]] = {}  # group -> (its first member's trajectory, start digest)
        for slot in np.flatnonzero(active >= 0).tolist():
            digests[int(active[slot])] = self._reset_record(base, slot, int(active[slot]))
            self._check_group_start(env, starts, group_of[int(active[slot])], int(active[slot]), digests[int(active[slot])])
            reserved[slot] = scheduler.next(recorded)
            if reserved[slot] is not None:
                self._schedule(env, slot, reserved[slot])

        record = _StepRecord()
        while (active >= 0).any():
            running = active >= 0
            stepped = self._env_step(env, obs, callback, record, active, lengths + 1)
            if stepped is None:
                return False
            new_obs, dones, infos = stepped
            recorded += int(running.sum())
            lengths[running] += 1
            too_long = running & (lengths > self.max_trajectory_length)
            if too_long.any():
                raise RuntimeError(
                    f"A trajectory in env slot {int(np.flatnonzero(too_long)[0])} ran for more than "
                    f"max_trajectory_length={self.max_trajectory_length} steps without ending. GRPO scores whole "
                    "episodes, so every episode must end: wrap the env in gymnasium.wrappers.TimeLimit (or register it "
                    "with max_episode_steps), or raise max_trajectory_length if such long episodes are intended."
                )

            for slot in np.flatnonzero(dones & running).tolist():
                trajectory = int(active[slot])
                truncated = bool(infos[slot].get("TimeLimit.truncated", False))
                ends[trajectory] = (not truncated, truncated)
                lengths[slot] = 0
                nxt = reserved[slot]
                reserved[slot] = None
                if nxt is None:
                    active[slot] = -1
                    continue
                digests[nxt.trajectory] = self._reset_record(base, slot, nxt.trajectory)
                self._check_group_start(env, starts, nxt.group, nxt.trajectory, digests[nxt.trajectory])
                if self.use_sde and self.sde_sample_freq == -1:
                    self.policy.reset_noise(n_envs, indices=[slot])
                active[slot] = nxt.trajectory
                group_of[nxt.trajectory] = nxt.group
                reserved[slot] = scheduler.next(recorded)
                if reserved[slot] is not None:
                    self._schedule(env, slot, reserved[slot])
            obs = new_obs

        self._last_obs = obs  # type: ignore[assignment]
        self._group_counter += scheduler.n_groups
        self._build_batch(rollout_buffer, record, ends, group_of, digests, scheduler.n_groups)
        callback.update_locals(locals())
        callback.on_rollout_end()
        self._rollout_start = None
        return True

    def _collect_branching(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: GroupRolloutBuffer, n_rollout_steps: int
    ) -> bool:
        """Rollout with branching groups: blocks of G slots run one group each in lockstep, segment by segment."""
        from sb3_grpo.common.group_sampling import group_seed

        if not getattr(self, "_snapshots_checked", False):
            # a clear error, before any step, if the env has no snapshotter
            refusal = next((r for r in env.env_method("sb3_grpo_check_snapshots") if isinstance(r, Exception)), None)
            if refusal is not None:
                raise refusal
            self._snapshots_checked = True
        self.policy.set_training_mode(False)
        n_envs, size, length = env.num_envs, self.group_size, int(self.branch_every)  # type: ignore[arg-type]
        n_blocks = n_envs // size
        base = base_vec_env(env)
        self._begin_rollout()
        callback.on_rollout_start()

        target = n_rollout_steps * n_envs
        # State to branch from, per block (None: start a new group). Episodes go on across rollouts: a rollout starts
        # from the states the previous one ended its last segment with (on the same env, with the same blocks).
        env_id = self._env_id(env)
        carried = self._branch_states
        snapshots: list[Any] = [None] * n_blocks
        if self.branch_carry_over and carried is not None and carried[0] == env_id and len(carried[1]) == n_blocks:
            snapshots = list(carried[1])
        group_of: dict[int, int] = {}
        digests: dict[int, str] = {}
        ends: dict[int, tuple[bool, bool]] = {}
        record = _StepRecord()
        recorded = segment_groups = new_groups = 0

        while recorded < target and (self.groups_per_rollout is None or segment_groups < self.groups_per_rollout):
            active = np.full(n_envs, -1, dtype=np.int64)
            pivots = self._np_rng.integers(size, size=n_blocks)
            for block in range(n_blocks):
                group = segment_groups
                segment_groups += 1
                seed = None
                if snapshots[block] is None:
                    seed = group_seed(self._seed_root, self._group_counter + new_groups)
                    new_groups += 1
                for member in range(size):
                    slot, trajectory = block * size + member, group * size + member
                    if seed is None:
                        env.env_method("sb3_grpo_schedule_restore", snapshots[block], trajectory, indices=[slot])
                    else:
                        env.env_method("sb3_grpo_schedule_reset", seed, trajectory, indices=[slot])
                    active[slot] = trajectory
                    group_of[trajectory] = group
            obs = env.reset()
            check_finite_observations(self._raw_obs(obs), np.zeros(n_envs, dtype=np.int64))
            if self.use_sde:  # every segment is a new trajectory for every slot
                self.policy.reset_noise(n_envs)
            starts: dict[int, tuple[int, str]] = {}
            for slot in range(n_envs):
                trajectory = int(active[slot])
                digests[trajectory] = self._reset_record(base, slot, trajectory)
                restored = snapshots[slot // size] is not None
                self._check_group_start(env, starts, group_of[trajectory], trajectory, digests[trajectory], restored)

            for segment_step in range(length):
                if not (active >= 0).any():
                    break
                running = active >= 0
                stepped = self._env_step(env, obs, callback, record, active, np.full(n_envs, segment_step + 1))
                if stepped is None:
                    return False
                new_obs, dones, infos = stepped
                recorded += int(running.sum())
                for slot in np.flatnonzero(dones & running).tolist():
                    truncated = bool(infos[slot].get("TimeLimit.truncated", False))
                    ends[int(active[slot])] = (not truncated, truncated)
                    active[slot] = -1
                obs = new_obs

            # Segment boundary: branch from each block's pivot, or start a new group where the pivot's episode ended.
            for block in range(n_blocks):
                pivot = block * size + int(pivots[block])
                alive = active[pivot] >= 0
                if not alive and self.branch_pivot == "alive":
                    survivors = block * size + np.flatnonzero(active[block * size : (block + 1) * size] >= 0)
                    if len(survivors):
                        pivot, alive = int(self._np_rng.choice(survivors)), True
                snapshots[block] = env.env_method("sb3_grpo_snapshot", indices=[pivot])[0] if alive else None
            for slot in np.flatnonzero(active >= 0).tolist():
                ends[int(active[slot])] = (False, False)  # cut by branching: neither terminal nor a time limit

        self._group_counter += new_groups
        self._branch_states = (env_id, list(snapshots))
        self._build_batch(rollout_buffer, record, ends, group_of, digests, segment_groups)
        self._last_obs = obs  # type: ignore[assignment]
        callback.update_locals(locals())
        callback.on_rollout_end()
        self._rollout_start = None
        return True

    def _build_batch(
        self,
        buffer: GroupRolloutBuffer,
        record: _StepRecord,
        ends: dict[int, tuple[bool, bool]],
        group_of: dict[int, int],
        digests: dict[int, str],
        n_groups: int,
    ) -> None:
        """Sort the recorded steps into whole trajectories, score them, compute advantages and fill the buffer."""
        steps_obs, steps_infos = record.obs, record.infos
        n_envs = record.trajectory[0].shape[0]
        n_env_steps = record.n_env_steps
        traj = np.stack(record.trajectory).reshape(-1)  # time-major (t, slot)
        used = np.flatnonzero(traj >= 0)
        order = used[np.argsort(traj[used], kind="stable")]  # trajectory by trajectory, steps in time order
        traj_sorted = traj[order]
        ids, starts, counts = np.unique(traj_sorted, return_index=True, return_counts=True)

        def gather(steps: list[np.ndarray]) -> np.ndarray:
            stacked = np.stack(steps)
            return stacked.reshape(-1, *stacked.shape[2:])[order]

        if isinstance(steps_obs[0], dict):
            observations: Any = {key: gather([o[key] for o in steps_obs]) for key in steps_obs[0]}
        else:
            observations = gather(steps_obs)
        actions = gather(record.actions)
        log_prob = gather(record.log_prob)
        rewards = gather(record.rewards)

        # (Every group started from one state: checked as each member started, see _check_group_start.)
        group_ids = np.array([group_of[int(i)] for i in ids], dtype=np.int64)

        trajectories = []
        infos_flat = [steps_infos[i // n_envs][i % n_envs] for i in order]
        for index, (trajectory, start, count) in enumerate(zip(ids, starts, counts, strict=True)):
            sl = slice(start, start + count)
            obs_i = {k: v[sl] for k, v in observations.items()} if isinstance(observations, dict) else observations[sl]
            terminated, truncated = ends[int(trajectory)]
            trajectories.append(
                Trajectory(
                    observations=obs_i,
                    actions=actions[sl],
                    rewards=rewards[sl],
                    infos=infos_flat[sl],
                    terminated=terminated,
                    truncated=truncated,
                    gamma=self.gamma,
                    group_id=int(group_ids[index]),
                    member=int(trajectory) % self.group_size,
                    index=index,
                )
            )
        outcomes, step_rewards, _, streams = self._reward_combiner.score(trajectories)
        terminated_flags = np.array([t.terminated for t in trajectories])
        inputs = AdvantageInputs.from_trajectories(
            step_rewards,
            self.gamma,
            outcome_rewards=outcomes,
            group_ids=group_ids,
            terminated=terminated_flags,
            reward_streams=None if self.reward_gammas is None else list(zip(streams, self.reward_gammas, strict=True)),
        )
        outputs = run_estimator(self._estimator, inputs)
        advantages = np.asarray(outputs.advantages).T[inputs.valid.T]

        # Per-step loss weights (see GroupRolloutBuffer).
        keep = np.array([not (self.mask_truncated and t.truncated) for t in trajectories])
        lengths = counts.astype(np.float64)
        if self.loss_type == "dr_grpo" and self.loss_constant is None:
            spec = self.env.get_attr("spec", indices=[0])[0] if self.env is not None else None
            limit = getattr(spec, "max_episode_steps", None)
            self.loss_constant = float(limit) if limit else float(lengths.max())
        per_trajectory = trajectory_loss_weights(
            lengths, keep, self.loss_type, self.group_size, self.group_loss_scale, self.loss_constant
        )
        if not keep.any():
            warnings.warn("mask_truncated=True dropped every trajectory of this rollout: no update.", stacklevel=2)
        weights = np.repeat(per_trajectory, counts)
        buffer.fill(observations, actions, log_prob, advantages, weights, np.repeat(np.arange(len(ids)), counts))
        buffer.group_ids = group_ids  # per trajectory, for inspection

        inverse, n_group, _ = group_index(group_ids)
        _, std, spread = grouped_mean_std(outcomes, inverse, n_group)
        self._stats = {
            "rollout/used_step_fraction": len(order) / max(n_env_steps, 1),
            "rollout/n_groups": n_groups,
            "rollout/n_trajectories": len(ids),
            "rollout/trajectory_len_mean": float(lengths.mean()),
            "rollout/outcome_reward_mean": float(np.mean(outcomes)),
            "train/group_reward_std": float(np.mean(std)),
            "train/zero_std_group_fraction": float(np.mean(spread == 0.0)),
        }

    # ------------------------------------------------------------------ update

    def train(self) -> None:
        """Update the policy on the current batch: ``n_epochs`` passes of minibatch gradient steps."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        progress = self._current_progress_remaining
        eps_low = self.clip_range(progress)  # type: ignore[operator]
        eps_high = self.clip_range_high(progress) if self.clip_range_high is not None else eps_low  # type: ignore[operator]
        buffer: GroupRolloutBuffer = self.rollout_buffer  # type: ignore[assignment]
        for key, value in self._stats.items():
            self.logger.record(key, value)
        if buffer.size == 0 or not np.any(buffer.weights > 0):
            self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
            return

        if self.ref_policy is not None:
            with th.no_grad():
                ref_log_prob = []
                for obs_t, actions_t in self._ref_batches(buffer):
                    ref_log_prob.append(self.ref_policy.evaluate_actions(obs_t, actions_t)[0].cpu().numpy())
            buffer.ref_log_prob = np.concatenate(ref_log_prob).astype(np.float32)

        by_trajectory = self.importance_sampling_level == "trajectory"
        pg_losses, kl_refs, entropies, clip_fractions, approx_kls = [], [], [], [], []
        continue_training = True
        for _epoch in range(self.n_epochs):
            for batch in buffer.get(self.batch_size, self._np_rng, by_trajectory=by_trajectory):
                log_prob, entropy = self.policy.evaluate_actions(batch.observations, batch.actions)
                per_step, surrogate, ratio, log_ratio, kl_ref = grpo_step_loss(
                    log_prob,
                    batch.old_log_prob,
                    batch.advantages,
                    eps_low,
                    eps_high,
                    beta=self.beta,
                    ref_log_prob=batch.ref_log_prob if self.ref_policy is not None else None,
                    trajectory=batch.trajectory if by_trajectory else None,
                    n_trajectories=batch.n_trajectories,
                )
                if kl_ref is not None:
                    kl_refs.append(float((batch.weights * kl_ref.detach()).sum() / batch.weights.sum().clamp_min(1e-12)))
                if entropy is None:
                    entropy = -log_prob
                loss = (batch.weights * (per_step - self.ent_coef * entropy)).sum()

                with th.no_grad():
                    weight_sum = batch.weights.sum().clamp_min(1e-12)
                    pg_losses.append(float((batch.weights * -surrogate).sum() / weight_sum))
                    entropies.append(float(entropy.mean()))
                    clipped = (ratio < 1.0 - eps_low) | (ratio > 1.0 + eps_high)
                    clip_fractions.append(float(clipped.float().mean()))
                    approx_kl = float(kl_estimate(log_ratio, "k3").mean())  # KL(pi_old || pi), as SB3's PPO logs it
                    approx_kls.append(approx_kl)
                if self.target_kl is not None and approx_kl > 1.5 * self.target_kl:
                    continue_training = False
                    if self.verbose >= 1:
                        print(f"Early stopping at epoch {_epoch} due to reaching max kl: {approx_kl:.2f}")
                    break

                self.policy.optimizer.zero_grad()
                loss.backward()
                th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += 1
            if not continue_training:
                break

        self._updates_done = getattr(self, "_updates_done", 0) + 1
        interval = self.ref_update_interval
        if self.ref_policy is not None and interval is not None and self._updates_done % interval == 0:
            self.ref_policy.load_state_dict(self.policy.state_dict())

        self.logger.record("train/policy_gradient_loss", float(np.mean(pg_losses)) if pg_losses else 0.0)
        self.logger.record("train/entropy_loss", -float(np.mean(entropies)) if entropies else 0.0)
        self.logger.record("train/approx_kl", float(np.mean(approx_kls)) if approx_kls else 0.0)
        self.logger.record("train/clip_fraction", float(np.mean(clip_fractions)) if clip_fractions else 0.0)
        self.logger.record("train/kl_ref", float(np.mean(kl_refs)) if kl_refs else 0.0)
        self.logger.record("train/loss", float(loss.item()))
        self.logger.record("train/clip_range", eps_low)
        if self.clip_range_high is not None:
            self.logger.record("train/clip_range_high", eps_high)
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        if self.log_std_max is not None:
            self.logger.record("train/log_std_max", getattr(self, "_log_std_bound", float("nan")))
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")

    def _ref_batches(self, buffer: GroupRolloutBuffer, chunk: int = 4096) -> Any:
        for start in range(0, buffer.size, chunk):
            idx = np.arange(start, min(start + chunk, buffer.size))
            samples = buffer._samples(idx)
            yield samples.observations, samples.actions

    # ------------------------------------------------------------------ save / learn

    def save(self, path: Any, exclude: Any = None, include: Any = None) -> None:
        """Save the model (see SB3's ``save``). A save made during a rollout (e.g. by ``CheckpointCallback``) stores
        the state at the start of that rollout, so a run resumed from it redoes that rollout exactly."""
        start = self._rollout_start
        if start is None:
            super().save(path, exclude=exclude, include=include)
            return
        current = {key: getattr(self, key) for key in start}
        try:
            for key, value in start.items():
                setattr(self, key, copy.deepcopy(value) if key == "_np_rng" else value)
            super().save(path, exclude=exclude, include=include)
        finally:
            for key, value in current.items():
                setattr(self, key, value)

    def learn(  # type: ignore[override]
        self: SelfGRPO,
        total_timesteps: int = 100_000,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "GRPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfGRPO:
        """Train for ``total_timesteps`` env steps (default 100,000: enough for CartPole-v1 with the defaults).

        Env steps of all slots count, including those of slots that wait idle for a rollout's last trajectories.
        """
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )

    def dump_logs(self, iteration: int = 0) -> None:
        super().dump_logs(iteration)
