"""
The group rollout: :class:`GroupRolloutCollector` runs whole groups of trajectories on a VecEnv and records them.

The collector takes explicit inputs: the policy, the VecEnv (whose slots carry the seeded-reset hook of
:mod:`sb3_grpo.common.groups.env_hooks`), the group settings (:class:`GroupSettings`), the seed state of the rollout
(:class:`SeedState`) and two callables of the algorithm that owns the step counters. It asks the
:class:`~sb3_grpo.common.groups.scheduler.GroupScheduler` which (group, member) trajectory each slot runs next, checks
that the members of a group start from the same observation, steps the env with the policy and checks what comes
back, and returns what it found, a :class:`Rollout` (the steps, the groups, the new groups started, the states to
branch from): the algorithm applies that to its own counters, and
:func:`sb3_grpo.common.groups.trajectories.score_rollout` sorts it into scored trajectories. The branching variant
(``branch_every``) is :class:`sb3_grpo.common.groups.branching.BranchingCollector`. Used by the group-sampling
algorithms through :class:`~sb3_grpo.common.groups.algorithm.GroupSamplingAlgorithm`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from sb3_grpo.common.groups.env_hooks import INFO_KEY
from sb3_grpo.common.groups.scheduler import GroupScheduler
from sb3_grpo.common.policies import ActorPolicy, env_actions
from sb3_grpo.common.rollout_checks import check_finite_reset, check_finite_step
from sb3_grpo.common.vec_env import own_env_class, unwrap_vec_env

__all__ = [
    "GroupRolloutCollector",
    "GroupSettings",
    "NonReproducibleResetError",
    "Rollout",
    "SeedState",
    "StepRecord",
    "describe_env",
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
    :param new_groups: the groups started from a seeded reset (the algorithm advances its group counter by them).
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


@dataclass(frozen=True)
class GroupSettings:
    """The algorithm's arguments a collector follows (documented on :class:`sb3_grpo.GRPO`).

    :param algorithm: the algorithm's name, for messages.
    """

    algorithm: str
    group_size: int
    groups_per_rollout: int | None
    max_trajectory_length: int
    verify_group_starts: bool
    use_sde: bool
    sde_sample_freq: int
    branch_every: int | None = None
    branch_pivot: str = "any"
    branch_carry_over: bool = True
    branch_common_noise: bool = False


@dataclass
class SeedState:
    """Where the group seeds stand when a rollout (or one round of dynamic sampling) starts; the collector reads it
    and reports in its :class:`Rollout` what it used.

    :param seed_root: the root of every group's seed (see :func:`~sb3_grpo.common.groups.scheduler.group_seed`).
    :param group_counter: the groups started from a seeded reset so far.
    :param rng: the generator branching groups draw their pivots from (advanced as they draw).
    :param branch_states: branching groups: ``(env id, state to branch from per block)`` where the last rollout ended.
    """

    seed_root: int
    group_counter: int
    rng: np.random.Generator
    branch_states: tuple[str, list[Any]] | None = None


class GroupRolloutCollector:
    """Runs groups of ``group_size`` trajectories on ``env``, every member of a group from its group's seed.

    A slot reserves its next trajectory as it starts one (SB3's VecEnvs reset a slot inside ``step``, so the next
    start state must be in place before the episode ends); groups stop opening once ``n_steps * n_envs`` steps are
    recorded (or ``groups_per_rollout`` groups opened), and the open groups run to their end.

    :param policy: the policy that acts (its noise is reset as gSDE asks).
    :param env: the VecEnv to collect from, its slots carrying the seeded-reset hook
        (:func:`~sb3_grpo.common.groups.env_hooks.install_group_reset`).
    :param settings: the group settings.
    :param vec_normalize: the ``VecNormalize`` in ``env``'s stack, if any (the env's own observations and rewards are
        recorded and checked).
    :param count_steps: called with ``n_envs`` after every VecEnv step, before the callback: the algorithm counts its
        steps (SB3 callbacks read ``num_timesteps`` during the rollout).
    :param record_infos: called with ``(infos, dones)`` after the callback, as SB3's ``_update_info_buffer``.
    """

    def __init__(
        self,
        policy: ActorPolicy,
        env: VecEnv,
        settings: GroupSettings,
        vec_normalize: Any,
        count_steps: Callable[[int], None],
        record_infos: Callable[[Any, np.ndarray], None],
    ):
        self.policy = policy
        self.env = env
        self.settings = settings
        self.vec_normalize = vec_normalize
        self.count_steps = count_steps
        self.record_infos = record_infos
        self.base = unwrap_vec_env(env)
        self.n_envs = env.num_envs

    # ------------------------------------------------------------------ resets

    def schedule(self, slot: int, seed: int | None, trajectory: int) -> None:
        """The next reset of ``slot`` uses ``seed`` and starts ``trajectory`` (``seed=None``: an ordinary reset)."""
        self.env.env_method("sb3_grpo_schedule_reset", seed, trajectory, indices=[slot])

    def reset_digest(self, slot: int, expected: int) -> str:
        """The digest of the first observation of trajectory ``expected``, which ``slot`` just started."""
        record = self.base.reset_infos[slot].get(INFO_KEY) if self.base.reset_infos[slot] else None
        if record is None or record[0] != expected:
            raise RuntimeError(
                f"{self.settings.algorithm} scheduled trajectory {expected} in env slot {slot}, but the slot's reset "
                f"info reports {record!r}. Something between the VecEnv and the env (a custom VecEnv or a wrapper that "
                "resets on its own) bypassed the seeded reset; use DummyVecEnv or SubprocVecEnv with standard wrappers."
            )
        return record[2]

    def check_group_start(
        self, starts: dict[int, tuple[int, str]], group: int, trajectory: int, digest: str, restored: bool = False
    ) -> None:
        """Raise :class:`NonReproducibleResetError` as soon as a member of a group starts from another observation than
        the group's first member (``starts``: group -> (first member's trajectory, its start digest), filled here)."""
        if not self.settings.verify_group_starts:
            return
        first_trajectory, first_digest = starts.setdefault(group, (trajectory, digest))
        if digest == first_digest:
            return
        where = f"(env {describe_env(self.env)}, group {group}: trajectories {first_trajectory} and {trajectory})"
        if restored:
            raise NonReproducibleResetError(
                f"Members of a {self.settings.algorithm} branching group were restored from the same state snapshot "
                f"but started from different observations {where}: the env's state snapshotter does not restore "
                "everything the observation depends on. Fix the snapshotter registered for this env "
                "(register_state_snapshots), or pass verify_group_starts=False to train anyway."
            )
        raise NonReproducibleResetError(
            f"Members of a {self.settings.algorithm} group reset with the same seed but started from different "
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
        if self.settings.use_sde:  # every slot starts a new trajectory
            self.policy.reset_noise(self.n_envs)
        return obs

    # ------------------------------------------------------------------ steps

    def _raw_obs(self, obs: Any) -> Any:
        """The env's own observations (under a VecNormalize, before normalisation, which clips an inf to a number)."""
        return self.vec_normalize.old_obs if self.vec_normalize is not None else obs

    def act(self, obs: Any, noise_blocks: np.ndarray | None = None) -> tuple[th.Tensor, th.Tensor]:
        """Sample actions and their log-probabilities for every slot (under ``torch.inference_mode``).

        :param noise_blocks: common random numbers: the block of each slot; the slots of one block draw their action
            from the same noise (a diagonal Gaussian's ``eps`` in ``mean + std * eps``, a categorical's Gumbel noise
            in ``argmax(logits + g)``), so each slot's action is still a draw from its own policy distribution while
            the block's draws move together. ``None``: every slot draws its own (the policy's own sampling).
        """
        policy = self.policy
        with th.inference_mode():  # the values no_grad gives, with less bookkeeping
            obs_t = obs_as_tensor(obs, policy.device)  # type: ignore[arg-type]
            if noise_blocks is None:
                return policy(obs_t)
            distribution = policy.get_distribution(obs_t)
            inner: Any = distribution.distribution
            blocks = th.as_tensor(noise_blocks, device=policy.device)
            n_blocks = int(noise_blocks.max()) + 1
            if isinstance(inner, th.distributions.Normal):
                eps = th.randn((n_blocks, *inner.mean.shape[1:])).to(policy.device)
                flat = inner.mean + inner.stddev * eps[blocks]
                # the log-probability of the flat draw; the env gets the action space's shape, as from forward()
                shape = tuple(policy.action_space.shape or ())
                return flat.reshape((-1, *shape)), distribution.log_prob(flat)
            else:  # Categorical (checked by the algorithm): the Gumbel-max draw, with Gumbel noise shared by a block
                logits = inner.logits
                uniform = th.rand((n_blocks, *logits.shape[1:])).to(policy.device).clamp_(1e-20, 1.0)
                actions = th.argmax(logits - th.log(-th.log(uniform))[blocks], dim=-1)
            return actions, distribution.log_prob(actions)  # Discrete: flat already

    def step(
        self,
        obs: Any,
        callback: BaseCallback,
        record: StepRecord,
        active: np.ndarray,
        episode_step: np.ndarray,
        noise_blocks: np.ndarray | None = None,
    ) -> tuple[Any, np.ndarray, Any] | None:
        """Act in every slot, step the VecEnv, check and record the step (``None`` if a callback asked to stop).

        :param active: the trajectory each slot runs (-1: idle; its steps are not recorded as anyone's).
        :param episode_step: the step index each slot reaches with this step (for error messages).
        :param noise_blocks: common random numbers for the slots of each block (see :meth:`act`).
        :return: ``(new_obs, dones, infos)``.
        """
        policy, env, settings = self.policy, self.env, self.settings
        if (
            settings.use_sde
            and settings.sde_sample_freq > 0
            and record.n_env_steps // env.num_envs % settings.sde_sample_freq == 0
        ):
            policy.reset_noise(env.num_envs)
        actions_t, log_prob_t = self.act(obs, noise_blocks)
        actions = actions_t.cpu().numpy()
        clipped = env_actions(policy, actions)
        new_obs, rewards, dones, infos = env.step(clipped)
        self.count_steps(env.num_envs)
        callback.update_locals(locals())
        if not callback.on_step():
            return None
        self.record_infos(infos, dones)
        vec_normalize = self.vec_normalize
        raw_rewards = vec_normalize.get_original_reward() if vec_normalize is not None else rewards
        # an idle slot's reward belongs to no trajectory: only the running ones are checked
        check_finite_step(self._raw_obs(new_obs), np.where(active >= 0, raw_rewards, 0.0), infos, episode_step, dones)
        record.add(obs, actions, log_prob_t.cpu().numpy(), raw_rewards, active, infos)
        return new_obs, dones, infos

    # ------------------------------------------------------------------ one rollout

    def collect(
        self, callback: BaseCallback, n_rollout_steps: int, seeds: SeedState, max_groups: int | None = None
    ) -> Rollout | None:
        """Run the rollout's groups to their end (``None`` if a callback asked to stop).

        :param n_rollout_steps: open groups until ``n_rollout_steps * n_envs`` steps are recorded (unless the settings
            have ``groups_per_rollout``).
        :param seeds: where the group seeds stand.
        :param max_groups: with ``groups_per_rollout``, run this many groups instead (dynamic sampling's later rounds).
        """
        settings, n_envs = self.settings, self.n_envs
        groups = settings.groups_per_rollout if max_groups is None or not settings.groups_per_rollout else max_groups
        scheduler = GroupScheduler(
            settings.group_size,
            seeds.seed_root,
            seeds.group_counter,
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
            too_long = running & (lengths > settings.max_trajectory_length)
            if too_long.any():
                raise RuntimeError(
                    f"A trajectory in env slot {int(np.flatnonzero(too_long)[0])} ran for more than "
                    f"max_trajectory_length={settings.max_trajectory_length} steps without ending. "
                    f"{settings.algorithm} scores whole episodes, so every episode must end: wrap the env in "
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
                if settings.use_sde and settings.sde_sample_freq == -1:
                    self.policy.reset_noise(n_envs, indices=[slot])
                start(slot, nxt.trajectory, nxt.group)
            obs = new_obs
        return Rollout(record, ends, group_of, scheduler.n_groups, scheduler.n_groups, obs)
