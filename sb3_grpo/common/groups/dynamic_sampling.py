"""
Dynamic sampling (DAPO, Yu et al. 2025): keep only the groups that carry a learning signal.

A group whose members all got the same score has no signal: its group-relative advantages are all zero (GRPO) and it
holds no strict preference pair (OnlineDPO). With ``dynamic_sampling=True`` a rollout drops such groups and samples
further rounds of groups until the informative groups fill the rollout (``groups_per_rollout`` informative groups, or
``n_steps * n_envs`` steps of informative groups), for at most ``max_sampling_rounds`` rounds; then it trains on
what it has. Every env step counts in ``num_timesteps``, dropped groups' included. This module holds the pieces:
which trajectories belong to informative groups, the selection and the concatenation of scored rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

from sb3_grpo.common.advantages import group_index, grouped_mean_std
from sb3_grpo.common.groups.trajectories import ScoredRollout, rollout_stats

__all__ = [
    "concatenate_rounds",
    "every_episode_held_to_the_limit",
    "informative_trajectories",
    "members_went_alike",
    "no_signal_message",
    "sample_informative",
    "sampling_rounds_message",
    "select_trajectories",
]


def informative_trajectories(group_ids: np.ndarray, outcomes: np.ndarray) -> np.ndarray:
    """``(M,)`` bool: whether each trajectory's group holds two different scores (all equal, exactly: no signal)."""
    if len(outcomes) == 0:
        return np.zeros(0, dtype=bool)
    inverse, n_groups, _ = group_index(group_ids)
    _, _, spread = grouped_mean_std(outcomes, inverse, n_groups)
    return spread[inverse] > 0


def _take(value: Any, index: np.ndarray) -> Any:
    if isinstance(value, dict):
        return {key: v[index] for key, v in value.items()}
    return value[index]


def select_trajectories(scored: ScoredRollout, keep: np.ndarray) -> ScoredRollout:
    """The trajectories of ``scored`` where ``keep`` (``(M,)`` bool) is True, with their steps."""
    keep = np.asarray(keep, dtype=bool)
    steps = np.repeat(keep, scored.counts)
    kept = np.flatnonzero(keep)
    return ScoredRollout(
        observations=_take(scored.observations, steps),
        actions=scored.actions[steps],
        log_prob=scored.log_prob[steps],
        counts=scored.counts[keep],
        group_ids=scored.group_ids[keep],
        trajectories=[scored.trajectories[i] for i in kept],
        outcomes=scored.outcomes[keep],
        step_rewards=[scored.step_rewards[i] for i in kept],
        streams=[[stream[i] for i in kept] for stream in scored.streams],
        n_env_steps=scored.n_env_steps,
        n_groups=len(np.unique(scored.group_ids[keep])),
    )


def concatenate_rounds(parts: list[ScoredRollout]) -> ScoredRollout:
    """One scored rollout of the rounds ``parts`` (group ids must already differ between rounds)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    if isinstance(first.observations, dict):
        observations: Any = {key: np.concatenate([p.observations[key] for p in parts]) for key in first.observations}
    else:
        observations = np.concatenate([p.observations for p in parts])
    group_ids = np.concatenate([p.group_ids for p in parts])
    return ScoredRollout(
        observations=observations,
        actions=np.concatenate([p.actions for p in parts]),
        log_prob=np.concatenate([p.log_prob for p in parts]),
        counts=np.concatenate([p.counts for p in parts]),
        group_ids=group_ids,
        trajectories=[t for p in parts for t in p.trajectories],
        outcomes=np.concatenate([p.outcomes for p in parts]),
        step_rewards=[r for p in parts for r in p.step_rewards],
        streams=[[r for p in parts for r in p.streams[k]] for k in range(len(first.streams))],
        n_env_steps=sum(p.n_env_steps for p in parts),
        n_groups=len(np.unique(group_ids)),
    )


def sample_informative(
    collect_round: Callable[[int, int | None], ScoredRollout | None],
    n_envs: int,
    n_rollout_steps: int,
    groups_per_rollout: int | None,
    max_rounds: int,
) -> tuple[ScoredRollout, dict[str, float], tuple[int, int, int, int] | None] | None:
    """Rounds of groups until the informative ones fill the rollout or ``max_rounds`` rounds ran.

    The rollout wants ``groups_per_rollout`` informative groups, else ``n_rollout_steps * n_envs`` steps of them;
    each round after the first samples what is still missing.

    :param collect_round: ``collect_round(steps, groups)`` collects and scores one round (``steps`` per env, or
        ``groups`` groups when not ``None``); ``None`` when a callback stopped training.
    :return: ``None`` when training was stopped; else the informative groups, the rollout statistics, and, when the
        rounds ran out before the rollout was full, ``(kept_groups, kept_steps, target_steps, n_sampled_groups)``
        (else ``None``).
    """
    target_steps = n_rollout_steps * n_envs
    parts: list[ScoredRollout] = []
    outcomes: list[np.ndarray] = []
    group_ids: list[np.ndarray] = []
    n_sampled_groups = kept_groups = kept_steps = rounds = 0
    steps, groups = n_rollout_steps, None
    shortfall: tuple[int, int, int, int] | None = None
    while rounds < max_rounds:
        scored = collect_round(steps, groups)
        if scored is None:
            return None
        rounds += 1
        scored.group_ids = scored.group_ids + n_sampled_groups  # distinct across rounds
        n_sampled_groups += scored.n_groups
        outcomes.append(scored.outcomes)
        group_ids.append(scored.group_ids)
        part = select_trajectories(scored, informative_trajectories(scored.group_ids, scored.outcomes))
        parts.append(part)
        kept_groups += part.n_groups
        kept_steps += part.n_steps
        if groups_per_rollout:
            if kept_groups >= groups_per_rollout:
                break
            groups = groups_per_rollout - kept_groups
        else:
            if kept_steps >= target_steps:
                break
            steps = -(-(target_steps - kept_steps) // n_envs)
    else:
        shortfall = (kept_groups, kept_steps, target_steps, n_sampled_groups)
    batch = concatenate_rounds(parts)
    stats = rollout_stats(batch, np.concatenate(outcomes), np.concatenate(group_ids))
    stats["rollout/informative_group_fraction"] = kept_groups / max(n_sampled_groups, 1)
    stats["rollout/sampling_rounds"] = rounds
    return batch, stats, shortfall


def sampling_rounds_message(
    algorithm: str,
    max_rounds: int,
    groups_per_rollout: int | None,
    kept_groups: int,
    kept_steps: int,
    target_steps: int,
    n_sampled: int,
) -> str:
    """What to say when dynamic sampling ran out of rounds before the rollout was full."""
    wanted = (
        f"{groups_per_rollout} informative groups (groups_per_rollout)"
        if groups_per_rollout
        else f"{target_steps} steps of informative groups (n_steps * n_envs)"
    )
    held = f"{kept_groups} groups" + ("" if groups_per_rollout else f" ({kept_steps} steps)")
    return (
        f"{algorithm}: dynamic_sampling ran max_sampling_rounds={max_rounds} rounds of groups "
        f"and the rollout holds {held} of the {wanted} asked for: {n_sampled - kept_groups} of the {n_sampled} groups "
        "sampled scored all their members equally (no signal) and were dropped. Training goes on with the "
        "informative groups there are (no update where there are none). Raise max_sampling_rounds or group_size, "
        "or give the reward functions finer scores. Warned once per learn(); "
        "rollout/informative_group_fraction logs the fraction every rollout."
    )


def every_episode_held_to_the_limit(scored: ScoredRollout) -> bool:
    """Every trajectory ran to its time limit with the same env return: a solved survival task (CartPole at 500),
    whose groups compare equal because there is nothing left to learn, not because the reward misses the policy."""
    trajectories = scored.trajectories
    if not trajectories or not all(t.truncated and not t.terminated for t in trajectories):
        return False
    returns = [float(np.sum(t.rewards)) for t in trajectories]
    return max(returns) == min(returns)


def members_went_alike(scored: ScoredRollout, action_space: spaces.Space | None = None) -> bool:
    """Whether the members of every group took the same actions (as the env saw them: Box actions clipped to
    ``action_space``'s bounds, equal to 1e-6) through the same observations, step by step, with some trajectory longer
    than one step: from their group's one start state the policy acted alike on them, whatever the reward."""
    if not scored.trajectories or int(scored.counts.max()) < 2:
        return False
    actions = np.asarray(scored.actions)
    if isinstance(action_space, spaces.Box):
        actions = np.clip(actions.reshape(len(actions), *action_space.shape), action_space.low, action_space.high)
    obs = scored.observations
    arrays = list(obs.values()) if isinstance(obs, dict) else [obs]
    starts = scored.starts
    first_of_group: dict[int, int] = {}
    for i, group in enumerate(scored.group_ids.tolist()):
        j = first_of_group.setdefault(group, i)
        if scored.counts[i] != scored.counts[j]:
            return False
        a, b = slice(starts[i], starts[i] + scored.counts[i]), slice(starts[j], starts[j] + scored.counts[j])
        if not all(np.array_equal(x[a], x[b]) for x in arrays):
            return False
        if not np.allclose(actions[a], actions[b], rtol=0.0, atol=1e-6):
            return False
    return True


def no_signal_message(
    algorithm: str,
    n_rollouts: int,
    scored: ScoredRollout,
    reward_functions: list[str],
    action_space: spaces.Space | None = None,
) -> str:
    """What to say when ``n_rollouts`` rollouts in a row had no group with any spread: every advantage is 0 and the
    updates leave the policy as it is. One such rollout is common early in a task with rare successes; several in a
    row mostly mean reward functions that do not see what the policy does, or members that all act alike."""
    outcomes = np.unique(scored.outcomes)
    alike = f"every trajectory scored {outcomes[0]:g}" if len(outcomes) == 1 else "each group scored all its members alike"
    if members_went_alike(scored, action_space):
        return (
            f"{algorithm}: no signal in the last {n_rollouts} rollouts: {alike}, and the members of each group went "
            "through the same observations step by step (this rollout): from the group's one start state the policy "
            "acts alike on them, so every group's members compare equal and the updates change nothing. The likely "
            "cause: actions beyond the action space's bounds, which the env clips to the same action (a policy mean "
            "that diverged: lower the learning rate, keep a clipped loss), or exploration noise that has collapsed "
            "(the logged train/std; raise ent_coef). Warned once per learn(); train/zero_std_group_fraction logs the "
            "fraction of groups without spread every rollout."
        )
    return (
        f"{algorithm}: no signal in the last {n_rollouts} rollouts: {alike} (reward "
        f"functions {reward_functions}, this rollout), so every group's members compare equal and the updates change "
        "nothing. The likely cause: reward functions that do not "
        "depend on what the policy does, e.g. 'episodic_return' on an env whose own reward is always 0 (such as "
        "sb3_grpo/Arithmetic-v0: leave reward_functions=None for the verifiable rewards it declares, or pass "
        "them, reward_functions=['arithmetic_exact_match']), or a "
        "reward that is the same for every episode (a constant, 'terminal_reward' on CartPole-v1). With a rare "
        "success, raise group_size or use dynamic_sampling=True. Warned once per learn(); "
        "train/zero_std_group_fraction logs the fraction of groups without spread every rollout."
    )
