"""REINFORCE's rollout storage: steps grouped by episode, and the batch of whole episodes an update trains on."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from sb3_grpo.common.advantages import AdvantageInputs, reward_to_go, run_estimator

__all__ = ["EPISODE_PROVIDES", "EpisodeBuffer", "episode_batch"]

#: What REINFORCE hands to advantage estimators: whole episodes (per-step rewards, one outcome per episode), no
#: critic, no groups.
EPISODE_PROVIDES = frozenset({"step_rewards", "outcome_rewards"})


def _batch_array(key: str, doc: str) -> property:
    """A read-only attribute: the array ``key`` of the buffer's last batch (``None`` before the first complete rollout)."""
    return property(lambda buffer: None if buffer.batch is None else buffer.batch[key], doc=doc)


class EpisodeBuffer:
    """
    The steps of a rollout, grouped by episode. An episode still running when a rollout ends stays in its slot and
    is handed out, whole, by the rollout in which it ends (its reward-to-go needs every reward to its end).

    :param n_envs: env slots.
    :param max_episode_length: an episode longer than this raises an error (an env that never ends).
    """

    def __init__(self, n_envs: int, max_episode_length: int):
        self.max_episode_length = max_episode_length
        self.running: list[dict[str, list[Any]]] = []
        self.finished: list[dict[str, Any]] = []
        #: The batch of the last complete rollout: its finished episodes' steps (kept until the next rollout starts).
        self.batch: dict[str, Any] | None = None
        #: Whether :attr:`batch` holds a complete rollout (SB3's ``RolloutBuffer.full``).
        self.full = False
        self.reset(n_envs)

    def reset(self, n_envs: int) -> None:
        """Drop every running and finished episode (the env was reset)."""
        self.running = [self._empty() for _ in range(n_envs)]
        self.finished = []
        self.batch = None
        self.full = False

    def size(self) -> int:
        """The steps in :attr:`batch` (0 before a complete rollout), as SB3's ``BaseBuffer.size()``."""
        return 0 if self.batch is None else len(self.batch["advantages"])

    @staticmethod
    def _empty() -> dict[str, list[Any]]:
        return {"obs": [], "actions": [], "rewards": []}

    def add(self, obs: Any, actions: np.ndarray, rewards: np.ndarray, dones: np.ndarray, infos: list[dict]) -> None:
        """Record one VecEnv step of every slot; episodes that end move to :attr:`finished`."""
        for i, episode in enumerate(self.running):
            episode["obs"].append({k: np.copy(v[i]) for k, v in obs.items()} if isinstance(obs, dict) else np.copy(obs[i]))
            episode["actions"].append(np.copy(actions[i]))
            episode["rewards"].append(float(rewards[i]))
            if dones[i]:
                truncated = bool(infos[i].get("TimeLimit.truncated", False))
                self.finished.append({**episode, "truncated": truncated})
                self.running[i] = self._empty()
            elif len(episode["rewards"]) > self.max_episode_length:
                raise RuntimeError(
                    f"REINFORCE: an episode in env slot {i} ran past max_episode_length={self.max_episode_length} steps "
                    "without ending: REINFORCE needs episodes that end (wrap the env in gymnasium.wrappers.TimeLimit), "
                    "or raise max_episode_length."
                )

    def pop_finished(self) -> list[dict[str, Any]]:
        """The episodes finished since the last call (and forget them)."""
        finished, self.finished = self.finished, []
        return finished

    # The last batch's arrays, one entry per step, episode after episode, under SB3's RolloutBuffer names.
    observations = _batch_array("obs", "The last batch's observations (SB3's ``RolloutBuffer.observations``).")
    actions = _batch_array("actions", "The last batch's actions as sampled (before clipping to a Box's bounds).")
    returns = _batch_array("returns", "The last batch's reward-to-go.")
    advantages = _batch_array("advantages", "The last batch's advantages (what the policy gradient weighs each step by).")

    @property
    def n_running_steps(self) -> int:
        """Steps held by episodes still running (carried over to a later rollout)."""
        return sum(len(episode["rewards"]) for episode in self.running)


def episode_batch(
    episodes: list[dict[str, Any]],
    gamma: float,
    estimator: Any,
    normalize_advantage: bool,
    observation_space: spaces.Space,
) -> dict[str, Any] | None:
    """Stack finished episodes (from :meth:`EpisodeBuffer.pop_finished`), with their reward-to-go and advantages.

    :param episodes: the episodes, in the order their steps are stacked.
    :param gamma: discount factor of the reward-to-go.
    :param estimator: the advantage estimator (a built-in baseline or a registered estimator).
    :param normalize_advantage: divide the advantages by their standard deviation over the batch.
    :param observation_space: the observation space (a Dict one stacks each key).
    :return: the batch (``obs``, ``actions``, ``returns``, ``advantages`` one per step, the mean ``baseline``,
        ``n_episodes``, ``n_truncated``), or ``None`` if no episode ended.
    """
    if not episodes:
        return None
    step_rewards = [np.asarray(e["rewards"], dtype=np.float64) for e in episodes]
    terminated = np.array([not e["truncated"] for e in episodes])
    inputs = AdvantageInputs.from_trajectories(step_rewards, gamma, terminated=terminated)
    outputs = run_estimator(estimator, inputs)
    valid = inputs.valid.T  # episode-major, so that the flattened steps follow the episodes in order
    advantages = np.asarray(outputs.advantages, dtype=np.float64).T[valid]
    returns = reward_to_go(inputs.rewards, gamma, inputs.valid).T[valid]
    baseline = float(np.mean(returns - advantages))  # the built-ins' b; an estimator's mean G_t - A_t
    if normalize_advantage and len(advantages) > 1:
        advantages = advantages / (advantages.std() + 1e-8)
    steps = [step for e in episodes for step in e["obs"]]
    obs: Any
    if isinstance(observation_space, spaces.Dict):
        obs = {key: np.stack([step[key] for step in steps]) for key in observation_space.spaces}
    else:
        obs = np.stack(steps)
    return dict(
        obs=obs,
        actions=np.stack([a for e in episodes for a in e["actions"]]),
        returns=returns,
        advantages=advantages,
        baseline=baseline,
        n_episodes=len(episodes),
        n_truncated=sum(e["truncated"] for e in episodes),
    )
