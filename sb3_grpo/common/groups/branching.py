"""
Branching groups (``branch_every``): :class:`BranchingCollector`.

The VecEnv's slots form blocks of ``group_size``; each block runs one group in lockstep, segment by segment. Every
``branch_every`` steps, all members of a block are set to the state one member (the pivot, drawn before the segment)
reached, through a state snapshot (see the ``register_state_snapshots`` hook), and the next segment is a fresh group
comparison; where the pivot's episode ended, the block starts a new group from a seeded reset.

With ``branch_common_noise`` (the vine of TRPO, Schulman et al. 2015, section 5.2, with common random numbers), the
members of a block draw their actions from shared noise after a segment's first step: members whose first actions
agree then follow the same trajectory in a deterministic env, and the differences of their returns are the effect of
their first actions (see :meth:`GroupRolloutCollector.act`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv

from sb3_grpo.common.groups.collector import GroupRolloutCollector, Rollout, SeedState, StepRecord
from sb3_grpo.common.groups.scheduler import group_seed

__all__ = ["BRANCH_PIVOTS", "BranchingCollector", "branching_problem", "check_snapshots", "env_id"]

#: The values ``branch_pivot`` accepts.
BRANCH_PIVOTS = ("any", "alive")


def branching_problem(
    branch_every: int | None, branch_pivot: str, n_envs: int | None, group_size: int, groups_per_rollout: int | None = None
) -> str | None:
    """What is wrong with the branching arguments (``None``: nothing)."""
    if branch_pivot not in BRANCH_PIVOTS:
        return f"branch_pivot must be one of {BRANCH_PIVOTS}, got {branch_pivot!r}"
    if branch_every is None:
        return None
    if branch_every < 1:
        return f"branch_every must be >= 1 or None, got {branch_every!r}"
    if n_envs and n_envs % group_size != 0:
        return (
            f"branch_every needs n_envs to be a multiple of group_size (each block of group_size env slots runs one "
            f"group in lockstep), got n_envs={n_envs}, group_size={group_size}: "
            f"use make_vec_env(..., n_envs={group_size * max(1, n_envs // group_size)})."
        )
    blocks = n_envs // group_size if n_envs else 1
    if groups_per_rollout is not None and groups_per_rollout % blocks != 0:
        below = groups_per_rollout // blocks * blocks
        nearest = " or ".join(str(n) for n in (below, below + blocks) if n > 0)
        return (
            f"with branch_every, every segment runs one group in each block of group_size env slots "
            f"(n_envs // group_size = {blocks} groups), so groups_per_rollout must be a multiple of {blocks}, got "
            f"groups_per_rollout={groups_per_rollout}: use groups_per_rollout={nearest}, or other n_envs."
        )
    return None


def env_id(env: VecEnv) -> str:
    """The env's registered id (else its class name): branching states carry over only to the same env."""
    spec = env.get_attr("spec", indices=[0])[0]
    return str(getattr(spec, "id", None) or env.get_attr("unwrapped", indices=[0])[0].__class__.__qualname__)


def check_snapshots(env: VecEnv) -> None:
    """Raise, before any step, the error of a slot whose env has no state snapshotter (the workers return it)."""
    refusal = next((r for r in env.env_method("sb3_grpo_check_snapshots") if isinstance(r, Exception)), None)
    if refusal is not None:
        raise refusal


class BranchingCollector(GroupRolloutCollector):
    """Runs branching groups (see the module docstring); a rollout ends at a segment boundary once
    ``n_steps * n_envs`` steps are recorded, or, with ``groups_per_rollout``, once that many segment groups ran
    (``n_steps`` then plays no part, as without branching). The env's snapshotters are checked by
    :func:`check_snapshots` first."""

    def collect(
        self, callback: BaseCallback, n_rollout_steps: int, seeds: SeedState, max_groups: int | None = None
    ) -> Rollout | None:
        settings, env, n_envs = self.settings, self.env, self.n_envs
        assert settings.branch_every is not None
        # max_groups is dynamic sampling's, which construction and load refuse together with branching
        assert max_groups is None, "BranchingCollector runs groups_per_rollout groups; max_groups is not supported"
        size, length = settings.group_size, int(settings.branch_every)
        n_blocks = n_envs // size
        target = n_rollout_steps * n_envs
        # State to branch from, per block (None: start a new group). Episodes go on across rollouts: a rollout starts
        # from the states the previous one ended its last segment with (on the same env, with the same blocks).
        name = env_id(env)
        carried = seeds.branch_states
        snapshots: list[Any] = [None] * n_blocks
        if settings.branch_carry_over and carried is not None and carried[0] == name and len(carried[1]) == n_blocks:
            snapshots = list(carried[1])
        group_of: dict[int, int] = {}
        ends: dict[int, tuple[bool, bool]] = {}
        record = StepRecord()
        recorded = segment_groups = new_groups = 0

        wanted = settings.groups_per_rollout
        while segment_groups < wanted if wanted is not None else recorded < target:
            active = np.full(n_envs, -1, dtype=np.int64)
            pivots = seeds.rng.integers(size, size=n_blocks)
            for block in range(n_blocks):
                group = segment_groups
                segment_groups += 1
                seed = None
                if snapshots[block] is None:
                    seed = group_seed(seeds.seed_root, seeds.group_counter + new_groups)
                    new_groups += 1
                for member in range(size):
                    slot, trajectory = block * size + member, group * size + member
                    if seed is None:
                        env.env_method("sb3_grpo_schedule_restore", snapshots[block], trajectory, indices=[slot])
                    else:
                        self.schedule(slot, seed, trajectory)
                    active[slot] = trajectory
                    group_of[trajectory] = group
            obs = self.reset()
            starts: dict[int, tuple[int, str]] = {}
            for slot in range(n_envs):
                trajectory = int(active[slot])
                restored = snapshots[slot // size] is not None
                self.check_group_start(starts, group_of[trajectory], trajectory, self.reset_digest(slot, trajectory), restored)

            blocks = np.arange(n_envs) // size if settings.branch_common_noise else None
            for segment_step in range(length):
                if not (active >= 0).any():
                    break
                running = active >= 0
                # common random numbers after the first step: the members' first actions are what the segment compares
                shared = blocks if segment_step > 0 else None
                stepped = self.step(obs, callback, record, active, np.full(n_envs, segment_step + 1), shared)
                if stepped is None:
                    return None
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
                if not alive and settings.branch_pivot == "alive":
                    survivors = block * size + np.flatnonzero(active[block * size : (block + 1) * size] >= 0)
                    if len(survivors):
                        pivot, alive = int(seeds.rng.choice(survivors)), True
                snapshots[block] = env.env_method("sb3_grpo_snapshot", indices=[pivot])[0] if alive else None
            for slot in np.flatnonzero(active >= 0).tolist():
                ends[int(active[slot])] = (False, False)  # cut by branching: neither terminal nor a time limit

        return Rollout(record, ends, group_of, segment_groups, new_groups, obs, branch_states=(name, list(snapshots)))
