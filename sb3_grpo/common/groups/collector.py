"""
The group rollout: :class:`GroupRolloutCollector` runs whole groups of trajectories on a VecEnv and records them.

The collector installs the seeded-reset hook in every slot (:mod:`sb3_grpo.common.groups.env_hooks`), asks the
:class:`~sb3_grpo.common.groups.scheduler.GroupScheduler` which (group, member) trajectory each slot runs next, checks
that the members of a group start from the same observation, steps the env with the policy and checks what comes
back. What it returns, a :class:`Rollout`, is sorted into scored trajectories by
:func:`sb3_grpo.common.groups.trajectories.score_rollout`. The branching variant (``branch_every``) is
:class:`sb3_grpo.common.groups.branching.BranchingCollector`. Used by every group-sampling algorithm (GRPO,
OnlineDPO) through :class:`~sb3_grpo.common.groups.algorithm.GroupSamplingAlgorithm`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from sb3_grpo.common.groups.env_hooks import INFO_KEY, install_group_reset, is_group_reset_class
from sb3_grpo.common.groups.scheduler import GroupScheduler
from sb3_grpo.common.rollout_checks import check_finite_reset, check_finite_step
from sb3_grpo.common.vec_env import own_env_class, unwrap_vec_env

if TYPE_CHECKING:
    from sb3_grpo.common.groups.algorithm import GroupSamplingAlgorithm

__all__ = [
    "GroupRolloutCollector",
    "NonReproducibleResetError",
    "Rollout",
    "StepRecord",
    "describe_env",
    "overshoot_limit",
    "warn_overshoot",
]


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
    cls = own_env_class(cls)  # not the subclass that this package's hooks swapped in
    return f"of class {cls.__module__}.{cls.__qualname__}"


def overshoot_limit(model: GroupSamplingAlgorithm) -> int | None:
    """The ``num_timesteps`` past which this ``learn`` is warned about (see :func:`warn_overshoot`): twice what was
    asked for, or twice one rollout of ``n_steps * n_envs`` steps (what SB3's PPO would run for a budget smaller than
    one rollout), whichever is larger."""
    requested = model._total_timesteps - model.num_timesteps
    nominal = 0 if model.groups_per_rollout is not None else model.n_steps * model.n_envs
    return model.num_timesteps + 2 * max(requested, nominal) if requested > 0 else None


def warn_overshoot(model: GroupSamplingAlgorithm, n_envs: int) -> None:
    """Say, once per ``learn``, that whole groups of whole episodes take the run past twice its budget (see
    ``GroupSamplingAlgorithm._setup_learn``)."""
    start = model._rollout_start["num_timesteps"] if model._rollout_start else model.num_timesteps
    if model.groups_per_rollout is not None:
        rule = f"groups_per_rollout={model.groups_per_rollout} groups of group_size={model.group_size} whole episodes"
    else:
        minimum = -(-2 * n_envs // model.group_size)
        rule = (
            f"groups of group_size={model.group_size} whole episodes until n_steps * n_envs = {model.n_steps} * "
            f"{n_envs} steps are recorded, and at least {minimum} groups with n_envs={n_envs}"
        )
    warnings.warn(
        f"{model._algorithm_name}: learn(total_timesteps={model._total_timesteps:,}) will run more than twice the steps "
        f"asked for: this rollout alone has run {model.num_timesteps - start:,} env steps so far, because a rollout "
        f"runs {rule}. For smaller rollouts on long episodes set groups_per_rollout (e.g. 1), a smaller group_size or "
        "fewer envs (n_envs); or raise total_timesteps.",
        stacklevel=2,
    )
    model._overshoot_warn_at = None


class StepRecord:
    """The per-step arrays of one rollout, time-major (one entry per VecEnv step)."""

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


@dataclass
class Rollout:
    """What one rollout recorded.

    :param record: the recorded steps.
    :param ends: trajectory id -> ``(terminated, truncated)``.
    :param group_of: trajectory id -> its group in this rollout.
    :param n_groups: the groups of this rollout.
    :param new_groups: the groups started from a seeded reset (they advance the model's group counter).
    :param last_obs: the observation the next rollout starts from.
    :param branch_states: branching groups: ``(env id, state to branch from per block)`` at the end.
    """

    record: StepRecord
    ends: dict[int, tuple[bool, bool]]
    group_of: dict[int, int]
    n_groups: int
    new_groups: int
    last_obs: Any
    branch_states: tuple[str, list[Any]] | None = None


class GroupRolloutCollector:
    """Runs groups of ``group_size`` trajectories on ``env``, every member of a group from its group's seed.

    A slot reserves its next trajectory as it starts one (SB3's VecEnvs reset a slot inside ``step``, so the next
    start state must be in place before the episode ends); groups stop opening once ``n_steps * n_envs`` steps are
    recorded (or ``groups_per_rollout`` groups opened), and the open groups run to their end.

    :param model: the algorithm (its policy, settings and step counters).
    :param env: the VecEnv to collect from.
    """

    def __init__(self, model: GroupSamplingAlgorithm, env: VecEnv):
        self.model = model
        self.env = env
        self.base = unwrap_vec_env(env)
        self.n_envs = env.num_envs
        if getattr(model, "_hooked_env", None) is not env or not all(
            is_group_reset_class(c) for c in env.get_attr("__class__")
        ):
            install_group_reset(env)
            model._hooked_env = env

    # ------------------------------------------------------------------ resets

    def schedule(self, slot: int, seed: int | None, trajectory: int) -> None:
        """The next reset of ``slot`` uses ``seed`` and starts ``trajectory`` (``seed=None``: an ordinary reset)."""
        self.env.env_method("sb3_grpo_schedule_reset", seed, trajectory, indices=[slot])

    def reset_digest(self, slot: int, expected: int) -> str:
        """The digest of the first observation of trajectory ``expected``, which ``slot`` just started."""
        record = self.base.reset_infos[slot].get(INFO_KEY) if self.base.reset_infos[slot] else None
        if record is None or record[0] != expected:
            raise RuntimeError(
                f"{self.model._algorithm_name} scheduled trajectory {expected} in env slot {slot}, but the slot's reset "
                f"info reports {record!r}. Something between the VecEnv and the env (a custom VecEnv or a wrapper that "
                "resets on its own) bypassed the seeded reset; use DummyVecEnv or SubprocVecEnv with standard wrappers."
            )
        return record[2]

    def check_group_start(
        self, starts: dict[int, tuple[int, str]], group: int, trajectory: int, digest: str, restored: bool = False
    ) -> None:
        """Raise :class:`NonReproducibleResetError` as soon as a member of a group starts from another observation than
        the group's first member (``starts``: group -> (first member's trajectory, its start digest), filled here)."""
        if not self.model.verify_group_starts:
            return
        first_trajectory, first_digest = starts.setdefault(group, (trajectory, digest))
        if digest == first_digest:
            return
        where = f"(env {describe_env(self.env)}, group {group}: trajectories {first_trajectory} and {trajectory})"
        if restored:
            raise NonReproducibleResetError(
                f"Members of a {self.model._algorithm_name} branching group were restored from the same state snapshot "
                f"but started from different observations {where}: the env's state snapshotter does not restore "
                "everything the observation depends on. Fix the snapshotter registered for this env "
                "(register_state_snapshots), or pass verify_group_starts=False to train anyway."
            )
        raise NonReproducibleResetError(
            f"Members of a {self.model._algorithm_name} group reset with the same seed but started from different "
            f"observations {where}: "
            "the env's reset(seed=...) is not reproducible, so a group baseline would compare different start states. "
            "Make it deterministic: in reset(), call super().reset(seed=seed) first and draw everything random from "
            "self.np_random (not from np.random, random or a generator of its own); if reset() samples a space "
            "(self.observation_space.sample(), self.action_space.sample()), seed that space from the reset seed too: "
            "self.observation_space.seed(seed) when seed is not None. Or pass verify_group_starts=False to train "
            "anyway (the members of a group then start from different states)."
        )

    def reset(self) -> Any:
        """Reset every slot (each with what is scheduled for it) and check the observations."""
        obs = self.env.reset()
        check_finite_reset(self._raw_obs(obs))
        if self.model.use_sde:  # every slot starts a new trajectory
            self.model.policy.reset_noise(self.n_envs)
        return obs

    # ------------------------------------------------------------------ steps

    def _raw_obs(self, obs: Any) -> Any:
        """The env's own observations (under a VecNormalize, before normalisation, which clips an inf to a number)."""
        vec_normalize = self.model._vec_normalize_env
        return vec_normalize.old_obs if vec_normalize is not None else obs

    def step(
        self, obs: Any, callback: BaseCallback, record: StepRecord, active: np.ndarray, episode_step: np.ndarray
    ) -> tuple[Any, np.ndarray, Any] | None:
        """Act in every slot, step the VecEnv, check and record the step (``None`` if a callback asked to stop).

        :param active: the trajectory each slot runs (-1: idle; its steps are not recorded as anyone's).
        :param episode_step: the step index each slot reaches with this step (for error messages).
        :return: ``(new_obs, dones, infos)``.
        """
        model, env = self.model, self.env
        if model.use_sde and model.sde_sample_freq > 0 and record.n_env_steps // env.num_envs % model.sde_sample_freq == 0:
            model.policy.reset_noise(env.num_envs)
        with th.inference_mode():  # the values no_grad gives, with less bookkeeping
            actions_t, log_prob_t = model.policy(obs_as_tensor(obs, model.device))  # type: ignore[arg-type]
        actions = actions_t.cpu().numpy()
        clipped = actions
        if isinstance(model.action_space, spaces.Box):
            if model.policy.squash_output:  # squashed into [-1, 1] (gSDE): rescale to the env's bounds, as SB3's PPO
                clipped = model.policy.unscale_action(actions)
            else:
                clipped = np.clip(actions, model.action_space.low, model.action_space.high)
        new_obs, rewards, dones, infos = env.step(clipped)
        model.num_timesteps += env.num_envs
        if model._overshoot_warn_at is not None and model.num_timesteps > model._overshoot_warn_at:
            warn_overshoot(model, env.num_envs)
        callback.update_locals(locals())
        if not callback.on_step():
            return None
        model._update_info_buffer(infos, dones)
        vec_normalize = model._vec_normalize_env
        raw_rewards = vec_normalize.get_original_reward() if vec_normalize is not None else rewards
        # an idle slot's reward belongs to no trajectory: only the running ones are checked
        check_finite_step(self._raw_obs(new_obs), np.where(active >= 0, raw_rewards, 0.0), infos, episode_step, dones)
        record.add(obs, actions, log_prob_t.cpu().numpy(), raw_rewards, active, infos)
        return new_obs, dones, infos

    # ------------------------------------------------------------------ one rollout

    def collect(self, callback: BaseCallback, n_rollout_steps: int, max_groups: int | None = None) -> Rollout | None:
        """Run the rollout's groups to their end (``None`` if a callback asked to stop).

        :param n_rollout_steps: open groups until ``n_rollout_steps * n_envs`` steps are recorded (unless the model
            has ``groups_per_rollout``).
        :param max_groups: with ``groups_per_rollout``, run this many groups instead (dynamic sampling's later rounds).
        """
        model, n_envs = self.model, self.n_envs
        groups = model.groups_per_rollout if max_groups is None or not model.groups_per_rollout else max_groups
        scheduler = GroupScheduler(
            model.group_size,
            model._seed_root,
            model._group_counter,
            target_steps=None if groups else n_rollout_steps * n_envs,
            max_groups=groups,
        )
        active = np.full(n_envs, -1, dtype=np.int64)  # trajectory running in each slot (-1: idle)
        reserved: list[Any] = [None] * n_envs  # the trajectory each slot starts next
        lengths = np.zeros(n_envs, dtype=np.int64)
        group_of: dict[int, int] = {}
        ends: dict[int, tuple[bool, bool]] = {}
        starts: dict[int, tuple[int, str]] = {}  # group -> (its first member's trajectory, start digest)
        recorded = 0

        def start(slot: int, trajectory: int, group: int) -> None:
            """``slot`` has just started ``trajectory``: check its start, then reserve its next trajectory."""
            self.check_group_start(starts, group, trajectory, self.reset_digest(slot, trajectory))
            active[slot] = trajectory
            group_of[trajectory] = group
            reserved[slot] = scheduler.next(recorded)
            if reserved[slot] is not None:
                self.schedule(slot, reserved[slot].seed, reserved[slot].trajectory)

        first = [scheduler.next(recorded) for _ in range(n_envs)]
        for slot, assignment in enumerate(first):
            self.schedule(
                slot, None if assignment is None else assignment.seed, -1 if assignment is None else assignment.trajectory
            )
        obs = self.reset()
        for slot, assignment in enumerate(first):
            if assignment is not None:
                start(slot, assignment.trajectory, assignment.group)

        record = StepRecord()
        while (active >= 0).any():
            running = active >= 0
            stepped = self.step(obs, callback, record, active, lengths + 1)
            if stepped is None:
                return None
            new_obs, dones, infos = stepped
            recorded += int(running.sum())
            lengths[running] += 1
            too_long = running & (lengths > model.max_trajectory_length)
            if too_long.any():
                raise RuntimeError(
                    f"A trajectory in env slot {int(np.flatnonzero(too_long)[0])} ran for more than "
                    f"max_trajectory_length={model.max_trajectory_length} steps without ending. "
                    f"{model._algorithm_name} scores whole episodes, so every episode must end: wrap the env in "
                    "gymnasium.wrappers.TimeLimit (or register it with max_episode_steps), or raise max_trajectory_length "
                    "if such long episodes are intended."
                )
            for slot in np.flatnonzero(dones & running).tolist():
                truncated = bool(infos[slot].get("TimeLimit.truncated", False))
                ends[int(active[slot])] = (not truncated, truncated)
                lengths[slot] = 0
                nxt, reserved[slot] = reserved[slot], None
                if nxt is None:
                    active[slot] = -1
                    continue
                if model.use_sde and model.sde_sample_freq == -1:
                    model.policy.reset_noise(n_envs, indices=[slot])
                start(slot, nxt.trajectory, nxt.group)
            obs = new_obs
        return Rollout(record, ends, group_of, scheduler.n_groups, scheduler.n_groups, obs)
