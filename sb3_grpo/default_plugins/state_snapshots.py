"""
Built-in state snapshotters.

- ``classic_control``: CartPole, Pendulum, Acrobot, MountainCar and MountainCarContinuous (``unwrapped.state``,
  Pendulum's ``last_u``) plus the episode clock.
- ``mujoco``: every Gymnasium MuJoCo env (``qpos``, ``qvel``, actuator activations, simulation time, warm-start
  accelerations) plus the episode clock.

Both copy the env's random generator state too, so stochastic transitions continue identically.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from gymnasium.error import DependencyNotInstalled

from sb3_grpo.common.snapshots import StateSnapshotter, get_episode_clock, set_episode_clock
from sb3_grpo.hookspecs import hookimpl

CLASSIC_CONTROL = ("CartPoleEnv", "PendulumEnv", "AcrobotEnv", "MountainCarEnv", "Continuous_MountainCarEnv")


class ClassicControlSnapshot(StateSnapshotter):
    """Gymnasium's classic-control envs."""

    def supports(self, env: Any) -> bool:
        core = env.unwrapped
        return type(core).__name__ in CLASSIC_CONTROL and type(core).__module__.startswith("gymnasium.envs.classic_control")

    def get(self, env: Any) -> dict[str, Any]:
        core = env.unwrapped
        return {
            "state": copy.deepcopy(core.state),
            "last_u": copy.deepcopy(getattr(core, "last_u", None)),
            "steps_beyond_terminated": getattr(core, "steps_beyond_terminated", None),
            "rng": copy.deepcopy(core.np_random.bit_generator.state),
            "clock": get_episode_clock(env),
        }

    def set(self, env: Any, state: dict[str, Any]) -> Any:
        core = env.unwrapped
        core.state = copy.deepcopy(state["state"])
        if hasattr(core, "last_u"):
            core.last_u = copy.deepcopy(state["last_u"])
        if hasattr(core, "steps_beyond_terminated"):
            core.steps_beyond_terminated = state["steps_beyond_terminated"]
        core.np_random.bit_generator.state = copy.deepcopy(state["rng"])
        set_episode_clock(env, state["clock"])
        name = type(core).__name__
        if name == "PendulumEnv":
            return core._get_obs()
        if name == "AcrobotEnv":
            return core._get_ob()
        return np.array(core.state, dtype=np.float32)


class MujocoSnapshot(StateSnapshotter):
    """Gymnasium's MuJoCo envs (``MujocoEnv`` subclasses)."""

    def supports(self, env: Any) -> bool:
        try:
            from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
        except (ImportError, DependencyNotInstalled):  # mujoco not installed (gymnasium 1.0's error is no ImportError)
            return False
        return isinstance(env.unwrapped, MujocoEnv)

    def get(self, env: Any) -> dict[str, Any]:
        data = env.unwrapped.data
        return {
            "qpos": data.qpos.copy(),
            "qvel": data.qvel.copy(),
            "act": data.act.copy(),
            "qacc_warmstart": data.qacc_warmstart.copy(),
            "ctrl": data.ctrl.copy(),
            "time": float(data.time),
            "rng": copy.deepcopy(env.unwrapped.np_random.bit_generator.state),
            "clock": get_episode_clock(env),
        }

    def set(self, env: Any, state: dict[str, Any]) -> Any:
        import mujoco

        core = env.unwrapped
        data = core.data
        data.qpos[:] = state["qpos"]
        data.qvel[:] = state["qvel"]
        if data.act.size:
            data.act[:] = state["act"]
        data.qacc_warmstart[:] = state["qacc_warmstart"]
        data.ctrl[:] = state["ctrl"]
        data.time = state["time"]
        mujoco.mj_forward(core.model, data)
        core.np_random.bit_generator.state = copy.deepcopy(state["rng"])
        set_episode_clock(env, state["clock"])
        return core._get_obs()


@hookimpl
def register_state_snapshots(register) -> None:
    register("classic_control", ClassicControlSnapshot)
    register("mujoco", MujocoSnapshot)
