"""
Issue 10 experiment: HalfCheetah with the control cost credited to its own step.

Registers two reward functions in-process, ``exp_ctrl`` (``info["reward_ctrl"]``) and ``exp_without_ctrl`` (the env
reward minus it), then runs harness cells of a sweep that names them with ``reward_gammas`` (``grpo_hc_ctrl0.yml``:
forward speed at 0.97, the control cost at 0, where only the action that paid it is credited).

    python -m benchmarks.exp_control_cost --algo grpo:hc_ctrl0 --seeds 0 1
"""

from __future__ import annotations

import numpy as np

from benchmarks import harness
from sb3_grpo import Trajectory, register_reward_function


def control_cost(trajectory: Trajectory) -> np.ndarray:
    return np.array([float(info["reward_ctrl"]) for info in trajectory.infos])


def without_control_cost(trajectory: Trajectory) -> np.ndarray:
    return np.asarray(trajectory.rewards, dtype=np.float64) - control_cost(trajectory)


def main(argv: list[str] | None = None) -> None:
    register_reward_function("exp_ctrl", control_cost)
    register_reward_function("exp_without_ctrl", without_control_cost)
    harness.run_experiment_cells(__doc__, "grpo:hc_ctrl0", [0, 1], argv)


if __name__ == "__main__":
    main()
