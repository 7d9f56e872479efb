"""
:class:`GroupSamplingAlgorithm`, the base of the algorithms that learn from groups of trajectories (GRPO,
OnlineDPO): ``class GRPO(GroupSamplingAlgorithm)``.

It holds what group sampling needs whatever the loss: the group and reward-function arguments and their checks, the
actor-only policy, the reward functions, the reproducible group seeds, and the rollout. Its ``collect_rollouts`` runs
whole groups (:class:`~sb3_grpo.common.groups.collector.GroupRolloutCollector`, or the branching variant), scores
them (:func:`~sb3_grpo.common.groups.trajectories.score_rollout`), with ``dynamic_sampling`` drops the groups
whose scores are all equal and samples more (:mod:`sb3_grpo.common.groups.dynamic_sampling`), and hands the scored
rollout to the algorithm's :meth:`GroupSamplingAlgorithm._fill_batch`; the algorithm writes that and ``train``. A
save made during a rollout stores the state at the start of that rollout, so a run resumed from it redoes that
rollout exactly.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import FloatSchedule, LinearSchedule
from stable_baselines3.common.vec_env import VecEnv

from sb3_grpo.common.arguments import check_argument_types
from sb3_grpo.common.base_class import AlgorithmMixin, loading
from sb3_grpo.common.groups.branching import BranchingCollector, branching_problem, check_snapshots
from sb3_grpo.common.groups.buffers import GroupRolloutBuffer
from sb3_grpo.common.groups.collector import GroupRolloutCollector, GroupSettings, SeedState
from sb3_grpo.common.groups.dynamic_sampling import (
    every_episode_held_to_the_limit,
    no_signal_message,
    sample_informative,
    sampling_rounds_message,
)
from sb3_grpo.common.groups.env_hooks import install_group_reset, is_group_reset_class
from sb3_grpo.common.groups.trajectories import ScoredRollout, rollout_stats, score_rollout
from sb3_grpo.common.policies import ActorPolicy, CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_grpo.common.reference import frozen_copy, update_reference
from sb3_grpo.common.reward_scoring import RewardCombiner
from sb3_grpo.common.schedules import KLAdaptiveLR
from sb3_grpo.plugins import get_reward_function

__all__ = ["NUMBER_TYPES", "GroupSamplingAlgorithm"]

NUMBER_TYPES = (int, float, np.integer, np.floating)


#: Rollouts in a row in which no group has any spread before GRPO and OnlineDPO warn that training has no signal.
NO_SIGNAL_ROLLOUTS = 3


class GroupSamplingAlgorithm(AlgorithmMixin, OnPolicyAlgorithm):
    """
    The shared base of the group-sampling algorithms (see the module docstring); not an algorithm by itself.

    The arguments are those of :class:`~sb3_grpo.grpo.GRPO` of the same names (documented there): ``n_steps``,
    ``groups_per_rollout``, ``group_size``, ``batch_size``, ``n_epochs``, the reward functions, branching groups,
    ``verify_group_starts``, ``max_trajectory_length``, gSDE and ``log_std_max``, ``dynamic_sampling`` and
    ``max_sampling_rounds``, and SB3's usual ones. A subclass
    sets its own arguments after calling this constructor, then ends its constructor with
    ``self._finish_init(advantage_estimator, advantage_kwargs, _init_setup_model)``; its ``_check_arguments`` calls
    :meth:`_check_group_arguments`, its ``_setup_model`` calls this class's first.
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    checks_steps_by_callback = False  # its own rollout checks every step (common/groups/collector.py)
    policy: ActorPolicy  # type: ignore[assignment]
    #: Branching groups: (env id, state to branch from per block) at the end of the last rollout (saved with the model).
    _branch_states: tuple[str, list[Any]] | None = None
    #: The VecEnv whose slots carry the group-reset hook (see :mod:`sb3_grpo.common.groups.collector`).
    _hooked_env: VecEnv | None = None
    #: Whether this ``learn`` has warned that dynamic sampling ran out of rounds (warned once per ``learn``).
    _sampling_warned: bool = False
    _no_signal_warned: bool = False
    _no_signal_rollouts: int = 0
    #: The frozen reference policy (see :meth:`_uses_reference`), ``None`` where the algorithm keeps none.
    ref_policy: ActorPolicy | None = None
    #: ``None`` keeps the initial policy as reference; ``k`` moves it toward the current policy every ``k`` updates.
    ref_update_interval: int | None = None
    #: The weight of the policy when the reference moves: ``alpha * policy + (1 - alpha) * reference`` (1: a copy).
    ref_mixup_alpha: float = 1.0
    #: Updates done so far (they time the reference policy's refreshes; saved with the model, for exact resume).
    _updates_done: int = 0

    def __init__(
        self,
        policy: str | type[ActorPolicy],
        env: GymEnv | str,
        *,
        learning_rate: float | Schedule,
        n_steps: int,
        groups_per_rollout: int | None,
        group_size: int,
        batch_size: int | None,
        n_epochs: int,
        gamma: float,
        ent_coef: float,
        max_grad_norm: float,
        reward_functions: Sequence[str | Callable] | str | Callable | None,
        reward_weights: Sequence[float] | None,
        reward_aggregation: str,
        branch_every: int | None,
        branch_pivot: str,
        branch_carry_over: bool,
        verify_group_starts: bool,
        max_trajectory_length: int,
        use_sde: bool,
        sde_sample_freq: int,
        log_std_max: float | Schedule | Sequence[float] | None,
        dynamic_sampling: bool,
        max_sampling_rounds: int,
        stats_window_size: int,
        tensorboard_log: str | None,
        policy_kwargs: dict[str, Any] | None,
        verbose: int,
        seed: int | None,
        device: th.device | str,
    ):
        check_argument_types(
            self._algorithm_name,
            dict(
                learning_rate=(learning_rate, "schedule"),
                n_steps=(n_steps, "int"),
                groups_per_rollout=(groups_per_rollout, "int?"),
                group_size=(group_size, "int"),
                batch_size=(batch_size, "int?"),
                n_epochs=(n_epochs, "int"),
                gamma=(gamma, "float"),
                ent_coef=(ent_coef, "float"),
                max_grad_norm=(max_grad_norm, "float"),
                branch_every=(branch_every, "int?"),
                max_trajectory_length=(max_trajectory_length, "int"),
                sde_sample_freq=(sde_sample_freq, "int"),
                max_sampling_rounds=(max_sampling_rounds, "int"),
                stats_window_size=(stats_window_size, "int"),
                reward_functions=(reward_functions, "functions?"),
                reward_weights=(reward_weights, "numbers?"),
            ),
        )
        super().__init__(
            policy,  # type: ignore[arg-type]  # SB3 types on-policy policies as ActorCriticPolicy; these are actor only
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
        if reward_functions is None:
            reward_functions = self._env_reward_functions() or ["episodic_return"]
        if isinstance(reward_functions, str) or callable(reward_functions):
            reward_functions = [reward_functions]  # type: ignore[list-item]
        self.reward_functions = list(reward_functions)  # type: ignore[arg-type]
        self.reward_weights = None if reward_weights is None else [float(w) for w in reward_weights]
        self.reward_aggregation = reward_aggregation
        self.branch_every = branch_every
        self.branch_pivot = branch_pivot
        self.branch_carry_over = branch_carry_over
        self.verify_group_starts = verify_group_starts
        self.max_trajectory_length = max_trajectory_length
        self.log_std_max = log_std_max
        self.dynamic_sampling = dynamic_sampling
        self.max_sampling_rounds = max_sampling_rounds

    def _env_reward_functions(self) -> list[str] | None:
        """The reward functions the env declares in ``metadata["reward_functions"]`` (``None``: none declared)."""
        if self.env is None:
            return None
        try:
            declared = self.env.get_attr("metadata", indices=[0])[0].get("reward_functions")
        except Exception:  # an env whose metadata cannot be read: it declares nothing
            return None
        return [declared] if isinstance(declared, str) else (list(declared) if declared else None)

    # ------------------------------------------------------------------ set-up

    def _check_group_arguments(self) -> None:
        """Check the arguments this class holds (SB3's shared ones, the groups', the reference policy's); a subclass's
        ``_check_arguments`` calls it."""
        fail = self._fail
        self._check_shared_arguments()
        if not isinstance(self.group_size, (int, np.integer)) or self.group_size < 2:
            fail(f"group_size must be an integer >= 2 (trajectories are compared within a group), got {self.group_size!r}")
        if self.groups_per_rollout is not None and self.groups_per_rollout < 1:
            fail(f"groups_per_rollout must be >= 1 or None, got {self.groups_per_rollout!r}")
        if self.batch_size is not None and self.batch_size < 1:
            fail(f"batch_size must be >= 1 or None (whole batch), got {self.batch_size!r}")
        if not isinstance(self.sde_sample_freq, (int, np.integer)) or not (
            self.sde_sample_freq == -1 or self.sde_sample_freq > 0
        ):
            fail(
                f"sde_sample_freq must be -1 (one gSDE noise matrix per trajectory) or a number of steps > 0, "
                f"got {self.sde_sample_freq!r}"
            )
        if self.max_trajectory_length < 1:
            fail(f"max_trajectory_length must be >= 1, got {self.max_trajectory_length!r}")
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
        if not isinstance(self.dynamic_sampling, (bool, np.bool_)):
            fail(f"dynamic_sampling must be True or False, got {self.dynamic_sampling!r}")
        if isinstance(self.learning_rate, KLAdaptiveLR) and self.n_epochs == 1 and self.batch_size is None:
            fail(
                f"learning_rate={self.learning_rate!r} adapts to the KL measured before each gradient step of an "
                "update, which is 0 by construction with one step per update (n_epochs=1 and batch_size=None: the "
                "whole batch in one minibatch), so the rate would never move: set n_epochs > 1 or a batch_size."
            )
        if self.max_sampling_rounds < 1:
            fail(
                f"max_sampling_rounds must be >= 1 (the most rounds of groups one rollout samples with dynamic_sampling), "
                f"got {self.max_sampling_rounds!r}"
            )
        if self.dynamic_sampling and self.branch_every is not None:
            fail(
                "dynamic_sampling drops whole groups and samples new ones, which branching groups (branch_every) cannot "
                "do: their segments continue each other. Use one of the two: dynamic_sampling=False or branch_every=None."
            )
        problem = branching_problem(
            self.branch_every, self.branch_pivot, getattr(self, "n_envs", None), self.group_size, self.groups_per_rollout
        )
        if problem is not None:
            fail(problem)
        interval = self.ref_update_interval
        if interval is not None and interval < 1:
            fail(f"ref_update_interval must be None (keep the initial policy) or >= 1, got {interval!r}")
        alpha = self.ref_mixup_alpha
        if isinstance(alpha, bool) or not isinstance(alpha, NUMBER_TYPES) or not 0 < alpha <= 1:
            fail(
                f"ref_mixup_alpha must be a number in (0, 1] (the weight of the policy when the reference moves toward it "
                f"every ref_update_interval updates; 1: a copy), got {alpha!r}"
            )
        if alpha != 1 and (self.ref_update_interval is None or not self._uses_reference()):
            warnings.warn(
                f"{self._algorithm_name}: ref_mixup_alpha={alpha!r} has no effect: the reference policy never moves "
                "(ref_update_interval=None) or there is none (beta=0). Set ref_update_interval (e.g. 10) for a moving "
                "reference.",
                stacklevel=5,
            )

    def _setup_model(self) -> None:
        """The policy, ``log_std_max``'s schedule, the reward functions, the buffer and the group seeds."""
        self._setup_policy()
        self._maybe_recommend_cpu()
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
        self.ref_policy = frozen_copy(self.policy) if self._uses_reference() else None

    def _uses_reference(self) -> bool:
        """Whether this algorithm keeps a frozen reference policy (GRPO with ``beta > 0``, OnlineDPO); a subclass
        says. It is built at set-up, saved with the model and refreshed by :meth:`_end_update`."""
        return False

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        names = ["policy", "policy.optimizer"]
        return ([*names, "ref_policy"] if self._uses_reference() else names), []

    def set_parameters(self, load_path_or_dict: Any, exact_match: bool = True, device: th.device | str = "auto") -> None:
        """SB3's ``set_parameters``. In ``load``, the file and the model may disagree on the reference policy: a file
        saved without one (``beta=0``) loaded with ``beta > 0`` takes the loaded policy as its reference (as a new
        model takes its initial policy); a file's reference is dropped where the model keeps none (``beta=0`` given
        to ``load``). Called directly, it checks the names as SB3's does."""
        if loading() and isinstance(load_path_or_dict, dict):
            params = dict(load_path_or_dict)
            if self._uses_reference() and "ref_policy" not in params and "policy" in params:
                params["ref_policy"] = params["policy"]
            elif not self._uses_reference():
                params.pop("ref_policy", None)
            load_path_or_dict = params
        super().set_parameters(load_path_or_dict, exact_match=exact_match, device=device)

    def _excluded_save_params(self) -> list[str]:
        return [
            *super()._excluded_save_params(),
            "_hooked_env",
            "_rollout_start",
            "_snapshots_checked",
            "ref_policy",  # saved as a torch state (see _get_torch_save_params)
            "_sampling_warned",
            "_no_signal_warned",
            "_no_signal_rollouts",
        ]

    # ------------------------------------------------------------------ rollouts

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
        self._arm_overshoot_warning(0 if self.groups_per_rollout is not None else self.n_steps * self.n_envs)
        self._sampling_warned = False
        self._no_signal_warned = False
        self._no_signal_rollouts = 0
        return setup

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
            bound = self._scheduled("log_std_max", self.log_std_max, minimum=None)  # type: ignore[arg-type]
            with th.no_grad():
                self.policy.log_std.clamp_(max=bound)
            self._log_std_bound = bound

    def _fill_batch(self, scored: ScoredRollout, rollout_buffer: GroupRolloutBuffer, env: VecEnv) -> dict[str, float] | None:
        """Turn the scored rollout (never empty) into the training batch in ``rollout_buffer``; each algorithm writes
        its own.

        :return: statistics of its own to add to ``rollout_buffer.stats`` (``rollout/`` ones are logged with the
            rollout, the algorithm's ``train`` logs ``train/`` ones), or ``None``.
        """
        raise NotImplementedError

    def collect_rollouts(  # type: ignore[override]
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: GroupRolloutBuffer, n_rollout_steps: int
    ) -> bool:
        """Run whole groups of trajectories (:mod:`sb3_grpo.common.groups.collector`,
        :mod:`sb3_grpo.common.groups.branching`), score them, with ``dynamic_sampling`` keep the informative groups
        and sample more (:meth:`_sample_informative`), and build the training batch (:meth:`_fill_batch`).

        :return: ``False`` if a callback asked to stop training (the partial rollout is then discarded).
        """
        assert self._last_obs is not None, "No previous observation was provided"
        collector = self._make_collector(env)
        self.policy.set_training_mode(False)
        self._begin_rollout()
        callback.on_rollout_start()
        if self.dynamic_sampling:
            sampled = self._sample_informative(collector, callback, n_rollout_steps)
            if sampled is None:
                return self._stopped_in_rollout()
            scored, stats = sampled
        else:
            scored_round = self._collect_round(collector, callback, n_rollout_steps)
            if scored_round is None:
                return self._stopped_in_rollout()
            scored = scored_round
            stats = rollout_stats(scored)
            no_spread = stats["train/zero_std_group_fraction"] == 1 and not every_episode_held_to_the_limit(scored)
            self._no_signal_rollouts = self._no_signal_rollouts + 1 if no_spread else 0
            if self._no_signal_rollouts >= NO_SIGNAL_ROLLOUTS:
                self._warn_no_signal(scored)
        extra: dict[str, float] | None = None
        if len(scored.counts):
            extra = self._fill_batch(scored, rollout_buffer, env)
        else:  # dynamic sampling found no informative group: nothing to train on
            rollout_buffer.reset()
        rollout_buffer.stats = {**stats, **(extra or {})}
        for key, value in rollout_buffer.stats.items():
            if key.startswith("rollout/"):
                self.logger.record(key, value)
        callback.update_locals(locals())
        callback.on_rollout_end()
        self._rollout_start = None
        return True

    def _make_collector(self, env: VecEnv) -> GroupRolloutCollector:
        """The collector of this rollout, on ``env`` with the seeded-reset hook installed (and, for branching groups,
        the env's snapshotters checked once)."""
        if self._hooked_env is not env or not all(is_group_reset_class(c) for c in env.get_attr("__class__")):
            install_group_reset(env)
            self._hooked_env = env
        settings = GroupSettings(
            algorithm=self._algorithm_name,
            group_size=self.group_size,
            groups_per_rollout=self.groups_per_rollout,
            max_trajectory_length=self.max_trajectory_length,
            verify_group_starts=self.verify_group_starts,
            use_sde=self.use_sde,
            sde_sample_freq=self.sde_sample_freq,
            branch_every=self.branch_every,
            branch_pivot=self.branch_pivot,
            branch_carry_over=self.branch_carry_over,
            branch_common_noise=bool(getattr(self, "branch_common_noise", False)),
        )
        collector_class = GroupRolloutCollector
        if self.branch_every is not None:
            if not getattr(self, "_snapshots_checked", False):
                check_snapshots(env)
                self._snapshots_checked = True
            collector_class = BranchingCollector
        return collector_class(
            self.policy, env, settings, self._vec_normalize_env, self._count_env_steps, self._update_info_buffer
        )

    def _collect_round(
        self, collector: GroupRolloutCollector, callback: BaseCallback, n_rollout_steps: int, max_groups: int | None = None
    ) -> ScoredRollout | None:
        """One collect-and-score round: collect from where the group seeds stand, apply what the collector found to this
        model's own state (groups started, the observation to go on from, the states to branch from), score it.

        :return: the scored round, ``None`` if a callback asked to stop.
        """
        seeds = SeedState(self._seed_root, self._group_counter, self._np_rng, self._branch_states)
        rollout = collector.collect(callback, n_rollout_steps, seeds, max_groups=max_groups)
        if rollout is None:
            return None
        self._group_counter += rollout.new_groups
        if rollout.branch_states is not None:
            self._branch_states = rollout.branch_states
        self._last_obs = rollout.last_obs
        return score_rollout(rollout, self._reward_combiner, self.gamma, self.group_size)

    def _count_env_steps(self, n: int) -> None:
        """Count ``n`` env steps of the rollout (the collector calls it after every VecEnv step)."""
        self.num_timesteps += n
        start = self._rollout_start["num_timesteps"] if self._rollout_start else self.num_timesteps
        self._check_overshoot(self.num_timesteps - start)

    def _overshoot_reason(self) -> str:
        n_envs = self.n_envs
        if self.groups_per_rollout is not None:
            rule = f"groups_per_rollout={self.groups_per_rollout} groups of group_size={self.group_size} whole episodes"
        else:
            minimum = -(-2 * n_envs // self.group_size)
            rule = (
                f"groups of group_size={self.group_size} whole episodes until n_steps * n_envs = {self.n_steps} * "
                f"{n_envs} steps are recorded, and at least {minimum} groups with n_envs={n_envs}"
            )
        return (
            f"a rollout runs {rule}. For smaller rollouts on long episodes set groups_per_rollout (e.g. 1), a smaller "
            "group_size or fewer envs (n_envs); or raise total_timesteps."
        )

    # ------------------------------------------------------------------ update

    def _has_batch(self) -> bool:
        """Whether the rollout left anything to train on (a subclass refines it)."""
        return self.rollout_buffer.size() > 0

    def _begin_update(self) -> bool:
        """The start of every update: training mode, the learning rate of this update, the batch's ``train/``
        statistics logged. ``False`` (with ``train/n_updates`` logged) when the batch has nothing to train on."""
        self._reference_as_asked()
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        for key, value in self.rollout_buffer.stats.items():  # type: ignore[attr-defined]
            if key.startswith("train/"):
                self.logger.record(key, value)
        if self._has_batch():
            return True
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        return False

    def _reference_as_asked(self) -> ActorPolicy | None:
        """The reference policy the arguments ask for now: a reference that they newly ask for (``beta`` set above 0
        by hand) is the current policy; one they no longer ask for is dropped."""
        if self._uses_reference() and self.ref_policy is None:
            self.ref_policy = frozen_copy(self.policy)
        elif not self._uses_reference():
            self.ref_policy = None
        return self.ref_policy

    def _end_update(self) -> None:
        """The end of every update that trained: count it, and every ``ref_update_interval`` updates move the reference
        policy to ``ref_mixup_alpha * policy + (1 - ref_mixup_alpha) * reference``
        (:func:`~sb3_grpo.common.reference.update_reference`; ``ref_mixup_alpha=1``: a copy of the policy)."""
        self._updates_done += 1
        interval = self.ref_update_interval
        if self.ref_policy is not None and interval is not None and self._updates_done % interval == 0:
            update_reference(self.ref_policy, self.policy, self.ref_mixup_alpha)

    def _stopped_in_rollout(self) -> bool:
        """A callback stopped ``learn`` during the rollout, whose part collected so far is discarded: the model now is
        what it holds (the steps, groups and random state used), and a save describes that, no longer the rollout's
        start (which only a save *during* the rollout stores, see :meth:`save`)."""
        self._rollout_start = None
        return False

    def _warn_no_signal(self, scored: ScoredRollout) -> None:
        """Say, once per ``learn``, that in :data:`NO_SIGNAL_ROLLOUTS` rollouts in a row every group scored all its
        members alike (:func:`~sb3_grpo.common.groups.dynamic_sampling.no_signal_message`)."""
        if self._no_signal_warned:
            return
        self._no_signal_warned = True
        names = [name for name, _ in self._reward_combiner.functions]
        message = no_signal_message(self._algorithm_name, self._no_signal_rollouts, scored, names, self.action_space)
        warnings.warn(message, stacklevel=3)

    def _sample_informative(
        self, collector: GroupRolloutCollector, callback: BaseCallback, n_rollout_steps: int
    ) -> tuple[ScoredRollout, dict[str, float]] | None:
        """Dynamic sampling (:func:`~sb3_grpo.common.groups.dynamic_sampling.sample_informative`), warning once per
        ``learn`` when it runs out of rounds before the rollout is full."""
        sampled = sample_informative(
            lambda steps, groups: self._collect_round(collector, callback, steps, max_groups=groups),
            n_envs=collector.n_envs,
            n_rollout_steps=n_rollout_steps,
            groups_per_rollout=self.groups_per_rollout,
            max_rounds=self.max_sampling_rounds,
        )
        if sampled is None:
            return None
        batch, stats, shortfall = sampled
        if shortfall is not None and not self._sampling_warned:
            self._sampling_warned = True
            message = sampling_rounds_message(
                self._algorithm_name, self.max_sampling_rounds, self.groups_per_rollout, *shortfall
            )
            warnings.warn(message, stacklevel=2)
        return batch, stats

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
