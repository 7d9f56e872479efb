"""State snapshots: snapshot, restore and replay the same actions give an identical continuation."""

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.monitor import Monitor

from sb3_grpo.common.groups.env_hooks import INFO_KEY, group_reset_class
from sb3_grpo.common.snapshots import SnapshotError, find_snapshotter

ENVS = [
    "CartPole-v1",
    "Pendulum-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "HalfCheetah-v5",
    "Hopper-v5",
]


def hooked(env_id):
    if env_id.endswith("-v5"):
        pytest.importorskip("mujoco")
    env = Monitor(gym.make(env_id))
    env.__class__ = group_reset_class(Monitor)
    return env


@pytest.mark.parametrize("env_id", ENVS)
def test_snapshot_restore_replay_is_identical(env_id):
    env = hooked(env_id)
    env.reset(seed=3)
    env.action_space.seed(0)
    for _ in range(3):
        env.step(env.action_space.sample())
    snapshot = env.sb3_grpo_snapshot()
    actions = [env.action_space.sample() for _ in range(20)]
    original = []
    for a in actions:
        original.append(env.step(a)[:3])
        if original[-1][2]:
            break

    other = hooked(env_id)
    other.reset(seed=99)  # a different episode
    other.sb3_grpo_schedule_restore(snapshot, ticket=5)
    _, info = other.reset()
    assert info[INFO_KEY][0] == 5
    replay = [other.step(a)[:3] for a in actions[: len(original)]]
    for (o1, r1, d1), (o2, r2, d2) in zip(original, replay, strict=True):
        np.testing.assert_array_equal(o1, o2)
        assert r1 == r2 and d1 == d2


def test_episode_clock_is_restored():
    env = hooked("Pendulum-v1")
    env.reset(seed=0)
    for _ in range(190):
        env.step(env.action_space.sample())
    snapshot = env.sb3_grpo_snapshot()
    other = hooked("Pendulum-v1")
    other.sb3_grpo_schedule_restore(snapshot, ticket=0)
    other.reset()
    truncated = [other.step(other.action_space.sample())[3] for _ in range(10)]
    assert truncated == [False] * 9 + [True]  # Pendulum's 200-step limit counts the restored 190 steps


def test_env_without_snapshotter_is_refused_naming_the_hook():
    from envs import TargetEnv

    with pytest.raises(SnapshotError, match="register_state_snapshots") as info:
        find_snapshotter(TargetEnv())
    assert "TargetEnv" in str(info.value) and "sb3_grpo.plugins.register_state_snapshot(" in str(info.value)


def test_observation_wrappers_are_refused():
    env = gym.wrappers.TransformObservation(
        gym.make("CartPole-v1"), lambda o: o * 2, gym.make("CartPole-v1").observation_space
    )
    with pytest.raises(SnapshotError, match="observation wrappers"):
        find_snapshotter(env)


@pytest.mark.parametrize("vec_env_cls", ["dummy", "subproc"])
def test_branching_groups_share_the_state_each_segment_starts_from(vec_env_cls):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecNormalize

    from sb3_grpo import GRPO

    venv = make_vec_env("Pendulum-v1", n_envs=4, seed=0, vec_env_cls=SubprocVecEnv if vec_env_cls == "subproc" else None)
    venv = VecNormalize(venv, norm_obs=False)
    try:
        model = GRPO("MlpPolicy", venv, group_size=2, branch_every=30, n_steps=200, n_epochs=1, seed=0, device="cpu")
        model.learn(1)
        buffer = model.rollout_buffer
        counts = np.bincount(buffer.trajectory)
        # Pendulum never terminates: segments are 30 steps, the last of each 200-step episode 200 - 6 * 30 = 20
        assert set(counts) <= {30, 20}
        starts = np.r_[0, np.cumsum(counts)[:-1]]
        firsts = buffer.observations[starts]
        groups = buffer.group_ids
        for g in np.unique(groups):
            members = firsts[groups == g]
            np.testing.assert_array_equal(members, np.broadcast_to(members[0], members.shape))
        # a later segment starts where one member of the previous segment of its block ended
        assert len(np.unique(groups)) >= 6
        assert model.rollout_buffer.stats["rollout/used_step_fraction"] == 1.0
    finally:
        venv.close()


@pytest.mark.parametrize("vec_env_cls", ["dummy", "subproc"])
def test_branching_refuses_an_env_without_snapshotter_before_any_step(vec_env_cls):
    """Under a SubprocVecEnv too: the worker answers with the refusal instead of dying of it."""
    from envs import TargetEnv
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    from sb3_grpo import GRPO

    venv = make_vec_env(TargetEnv, n_envs=2, vec_env_cls=SubprocVecEnv if vec_env_cls == "subproc" else None)
    try:
        model = GRPO("MlpPolicy", venv, group_size=2, branch_every=3, device="cpu")
        match = r"No state snapshotter supports the env 'TargetEnv' \(envs\.TargetEnv\).*register_state_snapshots"
        with pytest.raises(SnapshotError, match=match):
            model.learn(1)
        assert model.num_timesteps == 0
    finally:
        venv.close()


class _StartsAnywhere:
    """A broken snapshotter: its restore returns a random observation (the state it restores is not the one saved)."""

    def supports(self, env):
        from envs import TargetEnv

        return isinstance(env.unwrapped, TargetEnv)

    def get(self, env):
        return env.unwrapped.t

    def set(self, env, state):
        env.unwrapped.t = state
        return np.random.default_rng().uniform(-1, 1, 4).astype(np.float32)


def test_branching_members_restored_to_different_observations_are_refused_naming_the_snapshotter():
    from envs import TargetEnv
    from stable_baselines3.common.vec_env import DummyVecEnv

    from sb3_grpo import GRPO
    from sb3_grpo.grpo import NonReproducibleResetError
    from sb3_grpo.plugins import _snapshots, register_state_snapshot

    register_state_snapshot("starts_anywhere", _StartsAnywhere())
    try:
        model = GRPO("MlpPolicy", DummyVecEnv([lambda: TargetEnv(length=50)] * 2), group_size=2, branch_every=3, device="cpu")
        with pytest.raises(NonReproducibleResetError, match=r"restored from the same state snapshot .*snapshotter"):
            model.learn(1)
        assert model.num_timesteps == 2 * 3  # at the first branching, after one segment of 3 steps
    finally:
        _snapshots.unregister_local("starts_anywhere")


def test_branching_needs_whole_blocks_of_slots():
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_grpo import GRPO

    with pytest.raises(ValueError, match="multiple of group_size"):
        GRPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=3), group_size=2, branch_every=10, device="cpu")


@pytest.mark.parametrize("n_steps", [5, 400])
def test_branching_runs_exactly_groups_per_rollout_segment_groups(n_steps):
    """With groups_per_rollout a rollout runs that many segment groups whatever n_steps says, as without branching:
    4 slots in blocks of 2 run 2 groups per segment of 10 steps, so 6 groups are 3 segments, 120 steps."""
    model = _branching_pendulum(branch_every=10, groups_per_rollout=6, n_steps=n_steps)
    model.learn(1)
    assert model.num_timesteps == 120
    assert len(np.unique(model.rollout_buffer.group_ids)) == 6


def test_branching_groups_per_rollout_must_fill_whole_segments():
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_grpo import GRPO

    venv = make_vec_env("Pendulum-v1", n_envs=4)
    with pytest.raises(ValueError, match=r"multiple of 2, got groups_per_rollout=3: use groups_per_rollout=2 or 4"):
        GRPO("MlpPolicy", venv, group_size=2, branch_every=10, groups_per_rollout=3, device="cpu")
    with pytest.raises(ValueError, match=r"got groups_per_rollout=1: use groups_per_rollout=2,"):
        GRPO("MlpPolicy", venv, group_size=2, branch_every=10, groups_per_rollout=1, device="cpu")
    GRPO("MlpPolicy", venv, group_size=2, branch_every=10, groups_per_rollout=4, device="cpu")


def test_branching_groups_per_rollout_is_checked_against_the_env_given_at_load(tmp_path):
    """A model saved with one block of slots and loaded onto twice the envs would run two groups per segment: refused,
    naming the values that fit."""
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_grpo import GRPO

    model = _branching_pendulum(n_envs=2, branch_every=10, groups_per_rollout=1)
    model.save(tmp_path / "model")
    with pytest.raises(ValueError, match=r"multiple of 2, got groups_per_rollout=1: use groups_per_rollout=2, or other"):
        GRPO.load(tmp_path / "model", env=make_vec_env("Pendulum-v1", n_envs=4), device="cpu")
    GRPO.load(tmp_path / "model", env=make_vec_env("Pendulum-v1", n_envs=4), groups_per_rollout=2, device="cpu")


def test_branch_pivot_alive_branches_from_a_survivor_instead_of_restarting():
    """CartPole under a random policy ends episodes at different times inside a segment: with "any" a block restarts
    from reset whenever its pre-drawn member fell; with "alive" only when every member fell."""
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_grpo import GRPO

    fresh, resets = {}, {}
    for pivot in ("any", "alive"):
        venv = make_vec_env("CartPole-v1", n_envs=4, seed=0)
        model = GRPO(
            "MlpPolicy",
            venv,
            group_size=4,
            branch_every=12,
            n_steps=120,
            n_epochs=1,
            branch_pivot=pivot,
            seed=0,
            device="cpu",
        )
        calls = []
        original = venv.env_method

        def spy(name, *args, indices=None, _original=original, _calls=calls, **kwargs):
            _calls.append((name, indices))
            return _original(name, *args, indices=indices, **kwargs)

        venv.env_method = spy
        model.learn(1)
        fresh[pivot] = model._group_counter  # groups started from a reset
        resets[pivot] = sum(1 for name, _ in calls if name == "sb3_grpo_schedule_reset")  # one per slot of such a group
        starts = np.r_[0, np.cumsum(np.bincount(model.rollout_buffer.trajectory))[:-1]]
        firsts = model.rollout_buffer.observations[starts]
        for g in np.unique(model.rollout_buffer.group_ids):  # members of every segment-group share their first state
            members = firsts[model.rollout_buffer.group_ids == g]
            np.testing.assert_array_equal(members, np.broadcast_to(members[0], members.shape))
        venv.close()
    assert resets["any"] == 4 * fresh["any"] and resets["alive"] == 4 * fresh["alive"]
    assert fresh["alive"] < fresh["any"], fresh


def test_branch_pivot_is_checked():
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_grpo import GRPO

    with pytest.raises(ValueError, match=r"branch_pivot must be one of \('any', 'alive'\), got 'best'"):
        GRPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), group_size=2, branch_every=10, branch_pivot="best")


def _branching_pendulum(seed=0, carry_over=True, n_envs=4, **arguments):
    """GRPO with branching groups of 2 on Pendulum-v1 (``arguments`` replace the defaults)."""
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_grpo import GRPO

    defaults = dict(group_size=2, branch_every=30, n_steps=40, n_epochs=1, seed=seed, device="cpu")
    return GRPO(
        "MlpPolicy",
        make_vec_env("Pendulum-v1", n_envs=n_envs, seed=seed),
        branch_carry_over=carry_over,
        **{**defaults, **arguments},
    )


def test_branching_episodes_go_on_across_rollouts():
    """A rollout starts from the states the previous one ended its last segment with, so episodes run on to their
    time limit instead of restarting every rollout; a fresh learn() call starts new groups."""
    model = _branching_pendulum()

    def clocks():  # TimeLimit's step counter in every slot
        return set(model.env.get_attr("_elapsed_steps"))

    model.learn(240)  # one rollout: two segments of 30 steps in each block of 2 slots
    assert clocks() == {60} and model._group_counter == 2
    env_id, states = model._branch_states
    assert env_id == "Pendulum-v1" and len(states) == 2 and all(state is not None for state in states)
    model.learn(240, reset_num_timesteps=False)
    assert clocks() == {120} and model._group_counter == 2  # branched on from step 60, no new group
    model.learn(240)
    assert clocks() == {60} and model._group_counter == 4

    model = _branching_pendulum(carry_over=False)  # the other choice: every rollout starts new groups
    model.learn(240)
    model.learn(240, reset_num_timesteps=False)
    assert clocks() == {60} and model._group_counter == 4


def test_branching_resume_from_save_or_mid_rollout_checkpoint_is_exact(tmp_path):
    import torch as th
    from stable_baselines3.common.callbacks import CheckpointCallback
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_grpo import GRPO

    def params(model):
        return th.cat([p.detach().flatten() for p in model.policy.parameters()])

    straight = _branching_pendulum()
    straight.learn(1440)
    first = _branching_pendulum()
    first.learn(720, callback=CheckpointCallback(save_freq=50, save_path=str(tmp_path), name_prefix="ck"))
    first.save(tmp_path / "half.zip")
    for path in (tmp_path / "half.zip", sorted(tmp_path.glob("ck_*.zip"))[-1]):
        resumed = GRPO.load(path, env=make_vec_env("Pendulum-v1", n_envs=4, seed=123), device="cpu")
        assert resumed._branch_states is not None
        resumed.learn(1440 - resumed.num_timesteps, reset_num_timesteps=False)
        th.testing.assert_close(params(resumed), params(straight), rtol=0, atol=0)
