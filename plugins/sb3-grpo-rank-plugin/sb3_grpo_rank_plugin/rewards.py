"""Two reward functions: a per-step survival bonus and a penalty on action changes."""

from __future__ import annotations

import numpy as np

from sb3_grpo import Trajectory


def survival_bonus(trajectory: Trajectory) -> np.ndarray:
    """+1 per step, and -1 extra on the last step if the episode ended in a terminal state (a failure for survival
    tasks such as CartPole); a trajectory cut by a time limit keeps its full bonus. Per-step rewards."""
    bonus = np.ones(trajectory.length, dtype=np.float64)
    if trajectory.terminated:
        bonus[-1] -= 1.0
    return bonus


def action_smoothness(trajectory: Trajectory) -> float:
    """Minus the mean size of the change between consecutive actions (0 for a one-step trajectory).

    Discrete actions count a change as 1; continuous actions use the Euclidean norm of the difference.
    """
    actions = np.asarray(trajectory.actions, dtype=np.float64).reshape(trajectory.length, -1)
    if len(actions) < 2:
        return 0.0
    return -float(np.linalg.norm(np.diff(actions, axis=0), axis=1).mean())
