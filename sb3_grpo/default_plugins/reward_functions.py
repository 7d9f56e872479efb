"""
Built-in reward functions, registered through the same hook as third-party ones.

- ``episodic_return`` (default): the env's per-step rewards; their sum is the undiscounted episode return.
- ``discounted_return``: ``gamma^t r_t`` per step (sum: the discounted return with the algorithm's gamma).
- ``success``: 1.0 if the last step's info says ``is_success``, else 0.0.
- ``terminal_reward``: the env reward of the last step only.
- ``healthy_reward``: the per-step survival ("healthy") reward (``info["reward_survive"]``) of Gymnasium's MuJoCo
  locomotion envs (Hopper, Walker2d, Ant, Humanoid, ...). Combined with a negative weight it removes the bonus from
  the training reward: ``reward_functions=["episodic_return", "healthy_reward"], reward_weights=[1.0, -1.0]`` (the
  survival-bonus shift of Mania et al. 2018, "Simple random search provides a competitive approach to reinforcement
  learning", which keeps random search from settling on standing still).
- ``without_healthy_reward``: the env reward minus ``healthy_reward`` (forward progress and control or contact
  costs). With ``healthy_reward`` next to it the two sum to the env reward and can be discounted apart (GRPO's
  ``reward_gammas``).
- ``moving_healthy_reward``: ``healthy_reward`` times ``forward_reward`` clipped to [0, 1]: the survival bonus paid in
  full only while the body moves forward at 1 or more (m/s with the envs' default forward weight), in part below
  that, and not at all while it stands or moves back. Next to ``without_healthy_reward`` it trains a survival bonus
  that standing still does not earn.
- ``forward_reward``: the per-step forward-progress reward (``info["reward_forward"]``) of Gymnasium's MuJoCo
  locomotion envs (HalfCheetah, Hopper, Walker2d, Ant, Humanoid, Swimmer).
- ``cost_reward``: the env reward minus ``forward_reward`` and minus ``healthy_reward`` where the env pays one: the
  control and contact costs (``<= 0``). ``forward_reward``, ``cost_reward`` and (where the env has one)
  ``healthy_reward`` sum to the env reward, so each can be weighted and discounted on its own: e.g. a larger weight
  on forward progress alone, which a weight on ``without_healthy_reward`` cannot give (it scales the costs too).
"""

from __future__ import annotations

import numpy as np

from sb3_grpo.common.reward_scoring import RewardFunctionError, Trajectory
from sb3_grpo.default_plugins import register_each
from sb3_grpo.hookspecs import hookimpl


def episodic_return(trajectory: Trajectory) -> np.ndarray:
    """Per-step env rewards; the outcome is the undiscounted return of the episode."""
    return np.asarray(trajectory.rewards, dtype=np.float64)


def discounted_return(trajectory: Trajectory) -> np.ndarray:
    """Per-step ``gamma^t r_t``; the outcome is the discounted return from the start state."""
    rewards = np.asarray(trajectory.rewards, dtype=np.float64)
    return rewards * trajectory.gamma ** np.arange(len(rewards))


def success(trajectory: Trajectory) -> float:
    """1.0 if ``info["is_success"]`` of the last step is true, else 0.0.

    :raises RewardFunctionError: if the env never reports ``is_success`` (use an env that does, or another
        reward function).
    """
    last = trajectory.infos[-1] if trajectory.infos else {}
    if "is_success" not in last:
        raise RewardFunctionError(
            "the last step's info has no 'is_success' key: this env does not report success. Use an env that sets "
            "info['is_success'] at the end of an episode, or another reward function such as 'episodic_return'."
        )
    return float(bool(last["is_success"]))


def terminal_reward(trajectory: Trajectory) -> float:
    """The env reward of the last step."""
    return float(trajectory.rewards[-1])


def _info_stream(trajectory: Trajectory, key: str, missing: str) -> np.ndarray:
    """Per-step ``info[key]``; a step without it raises, naming the step and what to do (``missing``)."""
    values = np.empty(trajectory.length, dtype=np.float64)
    for t, info in enumerate(trajectory.infos):
        if key not in info:
            raise RewardFunctionError(f"step {t}'s info has no {key!r} key: {missing}")
        values[t] = float(info[key])
    return values


def healthy_reward(trajectory: Trajectory) -> np.ndarray:
    """Per-step ``info["reward_survive"]`` (the "healthy" reward of MuJoCo locomotion envs).

    Weighted by ``-1`` next to ``episodic_return`` it trains on the env reward without the survival bonus; the
    policy is still evaluated on the env reward.

    :raises RewardFunctionError: if a step's info has no ``reward_survive`` key (the env pays no survival bonus).
    """
    return _info_stream(
        trajectory,
        "reward_survive",
        "this env reports no survival bonus (Gymnasium's MuJoCo locomotion envs such as Hopper-v5, Walker2d-v5, "
        "Ant-v5 and Humanoid-v5 do). Remove 'healthy_reward' and 'without_healthy_reward' from reward_functions for "
        "this env.",
    )


def without_healthy_reward(trajectory: Trajectory) -> np.ndarray:
    """Per-step env reward minus ``info["reward_survive"]``: what the env pays besides staying alive.

    :raises RewardFunctionError: as :func:`healthy_reward`.
    """
    return np.asarray(trajectory.rewards, dtype=np.float64) - healthy_reward(trajectory)


def forward_reward(trajectory: Trajectory) -> np.ndarray:
    """Per-step ``info["reward_forward"]`` (the forward-progress reward of MuJoCo locomotion envs).

    :raises RewardFunctionError: if a step's info has no ``reward_forward`` key.
    """
    return _info_stream(
        trajectory,
        "reward_forward",
        "this env reports no forward reward (Gymnasium's MuJoCo locomotion envs such as HalfCheetah-v5, Hopper-v5, "
        "Walker2d-v5, Ant-v5 and Humanoid-v5 do). Remove 'forward_reward' and 'cost_reward' from reward_functions "
        "for this env.",
    )


def moving_healthy_reward(trajectory: Trajectory) -> np.ndarray:
    """Per-step ``info["reward_survive"] * clip(info["reward_forward"], 0, 1)``: the survival bonus paid while moving
    forward, in full from a forward reward of 1 (1 m/s with the default ``forward_reward_weight``), none while standing.

    :raises RewardFunctionError: as :func:`healthy_reward` and :func:`forward_reward`.
    """
    return healthy_reward(trajectory) * np.clip(forward_reward(trajectory), 0.0, 1.0)


def cost_reward(trajectory: Trajectory) -> np.ndarray:
    """Per-step env reward minus ``info["reward_forward"]`` and minus ``info["reward_survive"]`` where a step has
    one: what the env charges (control and contact costs), ``<= 0`` on Gymnasium's locomotion envs.

    :raises RewardFunctionError: as :func:`forward_reward`.
    """
    costs = np.asarray(trajectory.rewards, dtype=np.float64) - forward_reward(trajectory)
    return costs - np.array([float(info.get("reward_survive", 0.0)) for info in trajectory.infos], dtype=np.float64)


BUILTIN_REWARD_FUNCTIONS = {
    "episodic_return": episodic_return,
    "discounted_return": discounted_return,
    "success": success,
    "terminal_reward": terminal_reward,
    "healthy_reward": healthy_reward,
    "without_healthy_reward": without_healthy_reward,
    "forward_reward": forward_reward,
    "moving_healthy_reward": moving_healthy_reward,
    "cost_reward": cost_reward,
}


@hookimpl
def register_reward_functions(register) -> None:
    register_each(register, BUILTIN_REWARD_FUNCTIONS)
