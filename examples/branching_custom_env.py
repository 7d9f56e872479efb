"""
Branching groups on your own env: write a state snapshotter, check it, register it, train.

GRPO's branching groups (``branch_every=L``) set every member of a group to the state one member reached after ``L``
steps, so each segment is a fresh comparison from one shared state. That needs a snapshot of everything the env's
next steps depend on. Gymnasium's classic-control and MuJoCo envs have built-in snapshotters; this script shows the
three steps for an env of your own (a point mass that must reach a goal and stay there, 200-step episodes):

1. without a snapshotter, ``learn()`` with ``branch_every=L`` is refused before its first step, with an error naming
   the env and the hook;
2. the snapshotter is checked the way the test suite checks the built-ins: snapshot, take some random actions,
   restore, replay the same actions: the two continuations must be identical;
3. registered in this process (a plugin package would use the ``register_state_snapshots`` hook instead), GRPO
   trains with the per-step group baseline and segments of 50 steps.

Runtime: about 20-40 s on one CPU core (60,000 env steps). Expected output: the refusal, ``replay: identical``, then
``eval: -8.5 +/- 3.4 over 10 episodes`` (random actions score about -750 on these starts, doing nothing about -195).

    python examples/branching_custom_env.py
"""

import os

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import GRPO
from sb3_grpo.common.snapshots import SnapshotError, StateSnapshotter, get_episode_clock, set_episode_clock
from sb3_grpo.plugins import register_state_snapshot

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_000 if FAST else 60_000


class PointMassEnv(gym.Env):
    """A damped point mass on a plane; the action is a force. Reward: minus the distance to the goal, minus a
    small control cost. Start and goal are drawn at reset."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(6,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)

    def _obs(self):
        return np.concatenate([self.pos, self.vel, self.goal - self.pos]).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1.0, 1.0, size=2)
        self.vel = np.zeros(2)
        self.goal = self.np_random.uniform(-1.0, 1.0, size=2)
        return self._obs(), {}

    def step(self, action):
        force = np.clip(action, -1.0, 1.0)
        self.vel = 0.9 * self.vel + 0.05 * force
        self.pos = self.pos + self.vel
        reward = -float(np.linalg.norm(self.goal - self.pos)) - 0.01 * float(np.sum(force**2))
        return self._obs(), reward, False, False, {}


def make_env():
    return gym.wrappers.TimeLimit(PointMassEnv(), max_episode_steps=200)


class PointMassSnapshot(StateSnapshotter):
    """Everything PointMassEnv's next steps depend on: position, velocity, goal, its random generator and the
    episode clock (TimeLimit's elapsed steps, so a restored member ends its episode at the right step)."""

    def supports(self, env):
        return isinstance(env.unwrapped, PointMassEnv)

    def get(self, env):
        core = env.unwrapped
        return {
            "pos": core.pos.copy(),
            "vel": core.vel.copy(),
            "goal": core.goal.copy(),
            "rng": core.np_random.bit_generator.state,
            "clock": get_episode_clock(env),
        }

    def set(self, env, state):  # called right after env.reset(); returns the restored state's observation
        core = env.unwrapped
        core.pos, core.vel, core.goal = state["pos"].copy(), state["vel"].copy(), state["goal"].copy()
        core.np_random.bit_generator.state = state["rng"]
        set_episode_clock(env, state["clock"])
        return core._obs()


th.set_num_threads(1)  # small networks: one thread is the fastest on CPU
hyperparams = dict(
    group_size=4,  # 8 slots: 2 groups of 4
    n_steps=200,
    batch_size=256,
    n_epochs=10,
    gamma=0.95,  # credit over ~20 steps; a segment should span 1 / (1 - gamma) steps or more
    learning_rate=1e-3,
    advantage_estimator="group_step_baseline",  # per-step baseline: each member against the others at step t
    branch_every=50,  # every 50 steps the group branches from one member's state
    seed=0,
)

# 1. No snapshotter for this env yet: branching is refused before the first step, with what to do about it.
try:
    GRPO("MlpPolicy", make_vec_env(make_env, n_envs=8, seed=0), **hyperparams).learn(1_000)
except SnapshotError as exc:
    print(f"refused: {type(exc).__name__}: {str(exc).splitlines()[0]}")

# 2. Check the snapshotter: snapshot, 20 random actions, restore, the same 20 actions: identical continuations.
snapshotter, env = PointMassSnapshot(), make_env()
env.reset(seed=1)
for _ in range(30):
    env.step(env.action_space.sample())
state = snapshotter.get(env)
actions = [env.action_space.sample() for _ in range(20)]
first = [env.step(a)[:2] for a in actions]
env.reset()
snapshotter.set(env, state)
second = [env.step(a)[:2] for a in actions]
identical = all(np.array_equal(o1, o2) and r1 == r2 for (o1, r1), (o2, r2) in zip(first, second, strict=True))
print("replay:", "identical" if identical else "DIFFERENT (the snapshot misses some state)")
assert identical

# 3. Register it in this process and train with branching groups.
register_state_snapshot("point_mass", PointMassSnapshot)
model = GRPO("MlpPolicy", make_vec_env(make_env, n_envs=8, seed=0), **hyperparams)
model.learn(TOTAL_STEPS)

eval_env = make_vec_env(make_env, n_envs=1, seed=1000)
mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
