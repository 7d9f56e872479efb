"""GRPO's group sampling over VecEnvs: members share their start, groups per rollout, subprocess envs and
wrappers, the used step fraction."""

import numpy as np
import pytest
from grpo_helpers import first_obs_by_group
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv, VecFrameStack, VecMonitor, VecNormalize

from sb3_grpo import GRPO


@pytest.mark.parametrize("n_envs", [1, 3, 8])
def test_group_members_share_their_start_and_groups_differ(n_envs):
    model = GRPO(
        "MlpPolicy",
        make_vec_env("CartPole-v1", n_envs=n_envs, seed=1),
        groups_per_rollout=3,
        group_size=4,
        seed=3,
        device="cpu",
    )
    model.learn(1)  # one rollout
    groups = first_obs_by_group(model.rollout_buffer, 4)
    assert len(groups) >= 2
    for members in groups:
        assert np.all(members == members[0])
    firsts = np.array([g[0] for g in groups])
    assert len(np.unique(firsts, axis=0)) == len(groups)
    assert model.rollout_buffer.stats["rollout/used_step_fraction"] > 0.0


@pytest.mark.parametrize(
    "n_envs, group_size, groups_per_rollout, expected",
    [(8, 8, None, 2), (8, 4, None, 4), (6, 4, None, 3), (3, 2, None, 3), (8, 8, 1, 1), (8, 4, 1, 1)],
)
def test_groups_per_rollout_as_documented(n_envs, group_size, groups_per_rollout, expected):
    # n_steps=1: groups stop opening at once, but every slot has reserved its next trajectory when it started one,
    # so a rollout holds ceil(2 * n_envs / group_size) whole groups (n_steps' docstring); groups_per_rollout is exact.
    model = GRPO(
        "MlpPolicy",
        make_vec_env("CartPole-v1", n_envs=n_envs, seed=0),
        n_steps=1,
        group_size=group_size,
        groups_per_rollout=groups_per_rollout,
        batch_size=64,
        n_epochs=1,
        seed=0,
        device="cpu",
    )
    model.learn(1)
    assert model.rollout_buffer.stats["rollout/n_groups"] == expected
    assert model.rollout_buffer.stats["rollout/n_trajectories"] == expected * group_size
    assert len(first_obs_by_group(model.rollout_buffer, group_size)) == expected


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Hopper-v5"])
def test_subproc_and_wrappers_stacked_on_top(env_id):
    pytest.importorskip("mujoco") if env_id.startswith("Hopper") else None
    venv = make_vec_env(env_id, n_envs=3, seed=0, vec_env_cls=SubprocVecEnv)
    venv = VecNormalize(VecMonitor(venv), norm_obs=False, norm_reward=True)
    try:
        model = GRPO("MlpPolicy", venv, n_steps=50, group_size=2, seed=0, device="cpu", n_epochs=1)
        model.learn(1)
        groups = first_obs_by_group(model.rollout_buffer, 2)
        for members in groups:
            assert np.all(members == members[0])
        assert len(np.unique(np.array([g[0] for g in groups]), axis=0)) == len(groups)
    finally:
        venv.close()


def test_frame_stack_and_normalized_observations_stay_consistent():
    venv = VecFrameStack(VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0), norm_obs=False), n_stack=2)
    model = GRPO("MlpPolicy", venv, n_steps=32, group_size=2, seed=0, device="cpu", n_epochs=1)
    model.learn(1)
    buffer = model.rollout_buffer
    starts = np.r_[0, np.cumsum(np.bincount(buffer.trajectory))[:-1]]
    # at a reset the frame stack holds zeros and the new observation: no frame of the previous episode leaks in
    assert np.all(buffer.observations[starts][:, :4] == 0.0)
    # and the newest frame is the group's shared start
    for members in first_obs_by_group(buffer, 2):
        assert np.all(members == members[0])


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Hopper-v5"])
def test_used_step_fraction_from_a_fresh_policy(env_id):
    """Slots that finish move on to the next scheduled trajectory; only the idle tail of a rollout is lost."""
    if env_id.startswith("Hopper"):
        pytest.importorskip("mujoco")
    model = GRPO("MlpPolicy", make_vec_env(env_id, n_envs=8, seed=0), n_steps=1024, group_size=8, seed=0, device="cpu")
    fractions = []

    class Record(BaseCallback):
        def _on_rollout_end(self):
            fractions.append(model.rollout_buffer.stats["rollout/used_step_fraction"])

        def _on_step(self):
            return True

    model.learn(1, callback=Record())  # one rollout from the fresh policy
    assert len(fractions) == 1
    assert fractions[0] >= 0.95, fractions
