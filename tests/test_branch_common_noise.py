"""Branching groups with common random numbers (``branch_common_noise``, the vine with CRN): after a segment's first
step the members of a group draw their actions from shared noise; each segment trains on its first step only."""

import numpy as np
import pytest
import torch as th
from envs import TargetEnv
from stable_baselines3.common.env_util import make_vec_env

from sb3_grpo import GRPO
from sb3_grpo.common.groups.collector import SeedState
from sb3_grpo.common.groups.trajectories import score_rollout


def _model(env_id, **kwargs):
    env = make_vec_env(env_id, n_envs=4, seed=0)
    return GRPO(
        "MlpPolicy", env, group_size=4, n_steps=40, branch_every=10, seed=0, device="cpu",
        policy_kwargs=dict(net_arch=[16]), **kwargs,
    )  # fmt: skip


def _one_rollout(model):
    """A rollout collected directly (the policy is not updated), sorted into trajectories by group."""
    model.learn(1)  # sets up logger, env and callback state
    _, callback = model._setup_learn(10_000, None, reset_num_timesteps=False)
    collector = model._make_collector(model.env)
    seeds = SeedState(model._seed_root, model._group_counter, model._np_rng, model._branch_states)
    rollout = collector.collect(callback, model.n_steps, seeds)
    return score_rollout(rollout, model._reward_combiner, model.gamma, model.group_size)


def _segments(scored):
    """Per group: the members' (observations, actions) arrays."""
    starts = np.concatenate(([0], np.cumsum(scored.counts)))
    groups = {}
    for i, group in enumerate(scored.group_ids):
        steps = slice(starts[i], starts[i + 1])
        groups.setdefault(int(group), []).append((scored.observations[steps], scored.actions[steps]))
    return groups


@pytest.mark.parametrize("common", [True, False])
def test_gaussian_members_share_their_noise_after_the_first_step_only_with_common_noise(common):
    model = _model("Pendulum-v1", branch_common_noise=common)
    policy = model.policy
    for members in _segments(_one_rollout(model)).values():
        length = min(len(obs) for obs, _ in members)
        assert length == 10  # Pendulum's segments run whole
        noise = []
        for obs, actions in members:
            with th.no_grad():
                dist = policy.get_distribution(th.as_tensor(obs)).distribution
            noise.append(((th.as_tensor(actions) - dist.mean) / dist.stddev).numpy()[:length])
        noise = np.stack(noise)  # (members, steps, action_dim)
        assert not np.allclose(noise[:, 0], noise[0, 0])  # the first actions are the members' own draws
        same_later = np.allclose(noise[:, 1:], noise[:1, 1:], atol=1e-4)
        assert same_later == common


def test_categorical_members_whose_first_actions_agree_follow_one_trajectory():
    model = _model("CartPole-v1", branch_common_noise=True)
    checked = 0
    for members in _segments(_one_rollout(model)).values():
        by_first = {}
        for obs, actions in members:
            by_first.setdefault(int(actions[0]), []).append((obs, actions))
        for same in by_first.values():
            for obs, actions in same[1:]:
                n = min(len(actions), len(same[0][1]))
                np.testing.assert_array_equal(actions[:n], same[0][1][:n])  # shared Gumbel noise, same states
                np.testing.assert_allclose(obs[:n], same[0][0][:n])
                checked += 1
    assert checked > 0


def test_each_segment_trains_on_its_first_step_with_the_group_step_advantage():
    model = _model("Pendulum-v1", branch_common_noise=True, advantage_estimator="group_step_baseline")
    model.learn(40 * 4)
    buffer = model.rollout_buffer
    n_segments = len(buffer.group_ids)
    assert buffer.size() == n_segments  # one step per segment
    assert np.allclose(buffer.weights.sum(), 1.0)


@pytest.mark.parametrize(
    "env, kwargs, match",
    [
        ("Pendulum-v1", dict(), "needs branching groups"),
        ("Pendulum-v1", dict(branch_every=10, use_sde=True), "without gSDE.*use_sde=True"),
        (lambda: TargetEnv("multidiscrete"), dict(branch_every=10), r"categorical one.*MultiDiscrete"),
    ],
)
def test_branch_common_noise_is_refused_where_it_cannot_work(env, kwargs, match):
    with pytest.raises(ValueError, match=match):
        GRPO("MlpPolicy", make_vec_env(env, n_envs=4), group_size=4, branch_common_noise=True, device="cpu", **kwargs)


def test_a_box_of_several_dimensions_gets_actions_of_its_shape(fresh_plugins):
    """The shared-noise draw is flat like the distribution's; the env gets actions of the action space's shape."""
    import gymnasium as gym
    from gymnasium import spaces

    from sb3_grpo.common.snapshots import StateSnapshotter, get_episode_clock, set_episode_clock

    class MatrixActions(gym.Env):
        observation_space = spaces.Box(-1, 1, (3,), np.float32)
        action_space = spaces.Box(-1, 1, (2, 2), np.float32)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t, self.x = 0, self.np_random.uniform(-1, 1, 3).astype(np.float32)
            return self.x, {}

        def step(self, action):
            assert np.shape(action) == (2, 2)
            self.t += 1
            return self.x, float(np.sum(action)), self.t >= 6, False, {}

    class Snapshot(StateSnapshotter):
        def supports(self, env):
            return isinstance(env.unwrapped, MatrixActions)

        def get(self, env):
            return dict(t=env.unwrapped.t, x=env.unwrapped.x.copy(), clock=get_episode_clock(env))

        def set(self, env, state):
            env.unwrapped.t, env.unwrapped.x = state["t"], state["x"].copy()
            set_episode_clock(env, state["clock"])
            return env.unwrapped.x

    fresh_plugins.register_state_snapshot("matrix_actions", Snapshot)
    model = GRPO(
        "MlpPolicy", make_vec_env(MatrixActions, n_envs=2), group_size=2, n_steps=8, branch_every=3,
        branch_common_noise=True, policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    model.learn(40)
    assert model.rollout_buffer.actions.shape[1:] == (2, 2)  # as the default sampling stores them
