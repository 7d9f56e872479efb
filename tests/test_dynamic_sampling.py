"""Dynamic sampling (DAPO) of the group-sampling algorithms: groups whose scores are all equal are dropped and more
groups are sampled, every step counts, the fraction is logged, the options are saved, bad options are refused."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from sb3_grpo import GRPO, OnlineDPO
from sb3_grpo.common.groups.dynamic_sampling import informative_trajectories
from sb3_grpo.common.groups.scheduler import group_seed

ALGOS = [GRPO, OnlineDPO]
EPISODE = 3  # steps per episode of FlagEnv


class FlagEnv(gym.Env):
    """Episodes of ``EPISODE`` steps whose observation is a flag drawn at reset from the reset seed: 1 with
    probability ``rate``. With :func:`member_score`, a group started with flag 1 is informative, one with flag 0 is
    not, whatever the actions."""

    observation_space = spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, rate: float = 0.5):
        self.rate = rate
        self.flag = 0.0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.flag = float(self.np_random.random() < self.rate)
        self.t = 0
        return np.array([self.flag], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.flag], np.float32), 0.0, False, self.t >= EPISODE, {}


def member_score(trajectory):
    """The member's index where the group's flag is 1 (members differ: informative), else 0 (all equal)."""
    return float(trajectory.member) if trajectory.observations[0][0] == 1.0 else 0.0


def flag_of_group(model, counter, rate=0.5):
    return FlagEnv(rate).reset(seed=group_seed(model._seed_root, counter))[0][0]


class LastStats(BaseCallback):
    def __init__(self):
        super().__init__()
        self.stats = []

    def _on_rollout_end(self) -> None:
        self.stats.append(dict(self.model.logger.name_to_value))

    def _on_step(self) -> bool:
        return True


def make(model_class, rate=0.5, n_envs=1, **kwargs):
    env = make_vec_env(FlagEnv, n_envs=n_envs, env_kwargs=dict(rate=rate), seed=0)
    kwargs = dict(group_size=2, n_steps=6, batch_size=None, n_epochs=1, reward_functions=[member_score], seed=3) | kwargs
    return model_class("MlpPolicy", env, dynamic_sampling=True, **kwargs)


def test_informative_trajectories_by_hand():
    group_ids = np.array([0, 0, 1, 1, 1, 4, 4])
    outcomes = np.array([1.0, 1.0, 0.0, 0.5, 0.0, -2.0, 3.0])
    np.testing.assert_array_equal(informative_trajectories(group_ids, outcomes), [False, False, True, True, True, True, True])
    assert informative_trajectories(np.zeros(0, int), np.zeros(0)).shape == (0,)


@pytest.mark.parametrize("model_class", ALGOS, ids=lambda c: c.__name__)
def test_all_equal_groups_are_dropped_and_resampled(model_class):
    model = make(model_class, groups_per_rollout=3, max_sampling_rounds=20)
    # The rounds by hand: round 1 runs 3 groups, each later round the groups still missing.
    counter, kept, sampled, informative = 0, 0, 0, []
    while kept < 3:
        missing = 3 - kept
        flags = [flag_of_group(model, counter + i) for i in range(missing)]
        counter += missing
        sampled += missing
        kept += int(sum(flags))
        informative += [counter - missing + i for i, f in enumerate(flags) if f == 1.0]
    assert sampled > 3, "the seed should give at least one all-equal group"
    steps = sampled * 2 * EPISODE
    stats = LastStats()
    model.learn(total_timesteps=steps, callback=stats)

    buffer = model.rollout_buffer
    assert model.num_timesteps == steps  # every step taken counts, the dropped groups' too
    assert model._group_counter == sampled  # every group sampled advanced the seeds
    assert buffer.n_trajectories == kept * 2 and buffer.size() == kept * 2 * EPISODE
    assert np.all(buffer.observations[:, 0] == 1.0)  # only informative groups were kept
    assert len(np.unique(buffer.group_ids)) == kept
    (logged,) = stats.stats
    assert logged["rollout/informative_group_fraction"] == pytest.approx(kept / sampled)
    assert logged["rollout/n_groups"] == kept
    assert logged["rollout/used_step_fraction"] == pytest.approx(kept / sampled)
    assert logged["rollout/sampling_rounds"] >= 2
    # logged by train, after the rollout: of every group sampled
    assert model.logger.name_to_value["train/zero_std_group_fraction"] == pytest.approx(1 - kept / sampled)


@pytest.mark.parametrize("model_class", ALGOS, ids=lambda c: c.__name__)
def test_step_target_counts_informative_steps(model_class):
    # two env slots: idle steps of a slot count in num_timesteps as well
    model = make(model_class, n_envs=2, n_steps=9, max_sampling_rounds=20)
    stats = LastStats()
    model.learn(total_timesteps=1, callback=stats)
    buffer = model.rollout_buffer
    assert buffer.size() >= 9 * 2  # n_steps * n_envs steps of informative groups
    assert np.all(buffer.observations[:, 0] == 1.0)
    (logged,) = stats.stats
    all_steps = buffer.size() / logged["rollout/used_step_fraction"]
    assert model.num_timesteps == pytest.approx(all_steps)
    assert logged["rollout/informative_group_fraction"] < 1.0


@pytest.mark.parametrize("model_class", ALGOS, ids=lambda c: c.__name__)
def test_running_out_of_rounds_warns_once_and_skips_the_update(model_class):
    model = make(model_class, rate=0.0, groups_per_rollout=2, max_sampling_rounds=2)
    before = th.cat([p.detach().flatten().clone() for p in model.policy.parameters()])
    per_rollout = 2 * 2 * 2 * EPISODE  # two rounds of two groups of two members
    stats = LastStats()
    with pytest.warns(UserWarning, match="max_sampling_rounds=2") as record:
        model.learn(total_timesteps=2 * per_rollout, callback=stats)
    assert sum("max_sampling_rounds" in str(w.message) for w in record) == 1  # once per learn
    assert model.num_timesteps == 2 * per_rollout
    assert model.rollout_buffer.size() == 0
    assert [s["rollout/informative_group_fraction"] for s in stats.stats] == [0.0, 0.0]
    after = th.cat([p.detach().flatten() for p in model.policy.parameters()])
    assert th.equal(before, after)  # nothing to learn from


@pytest.mark.parametrize("model_class", ALGOS, ids=lambda c: c.__name__)
def test_off_by_default_keeps_every_group(model_class):
    env = make_vec_env(FlagEnv, n_envs=1, seed=0)
    model = model_class("MlpPolicy", env, group_size=2, groups_per_rollout=4, reward_functions=[member_score], seed=3)
    assert model.dynamic_sampling is False
    model.learn(total_timesteps=4 * 2 * EPISODE)
    assert model.rollout_buffer.n_trajectories == 8 and model._group_counter == 4
    assert "rollout/informative_group_fraction" not in model.logger.name_to_value


@pytest.mark.parametrize("model_class", ALGOS, ids=lambda c: c.__name__)
def test_save_load_keeps_the_options(model_class, tmp_path):
    model = make(model_class, groups_per_rollout=2, max_sampling_rounds=7)
    model.save(tmp_path / "model.zip")
    loaded = model_class.load(tmp_path / "model.zip")
    assert loaded.dynamic_sampling is True and loaded.max_sampling_rounds == 7


@pytest.mark.parametrize("model_class", ALGOS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_sampling_rounds=0), "max_sampling_rounds must be >= 1"),
        (dict(max_sampling_rounds="3"), "max_sampling_rounds must be an integer"),
        (dict(dynamic_sampling="yes"), "dynamic_sampling must be True or False"),
        (dict(dynamic_sampling=True, branch_every=5), "dynamic_sampling=False or branch_every=None"),
    ],
)
def test_bad_options_are_refused(model_class, kwargs, match):
    env = make_vec_env(FlagEnv, n_envs=2, seed=0)
    with pytest.raises(ValueError, match=match):
        model_class("MlpPolicy", env, group_size=2, **kwargs)
