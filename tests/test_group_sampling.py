"""The group scheduler and the reset hook, in isolation."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.monitor import Monitor

from sb3_grpo.common.groups import env_hooks
from sb3_grpo.common.groups.env_hooks import INFO_KEY, group_reset_class, install_group_reset, observation_digest
from sb3_grpo.common.groups.scheduler import GroupScheduler, group_seed


def test_scheduler_hands_out_whole_groups_with_shared_seeds():
    s = GroupScheduler(group_size=3, seed_root=5, first_group=10, max_groups=2)
    got = [s.next(0) for _ in range(7)]
    assert got[-1] is None
    assert [(a.group, a.member, a.trajectory) for a in got[:6]] == [
        (0, 0, 0),
        (0, 1, 1),
        (0, 2, 2),
        (1, 0, 3),
        (1, 1, 4),
        (1, 2, 5),
    ]
    assert got[0].seed == got[1].seed == got[2].seed == group_seed(5, 10)
    assert got[3].seed == group_seed(5, 11) != got[0].seed


def test_scheduler_by_steps_finishes_the_open_group():
    s = GroupScheduler(group_size=2, seed_root=0, first_group=0, target_steps=100)
    assert s.next(0).member == 0
    # the target is reached, but the open group still gets its second member
    assert s.next(150).member == 1
    assert s.next(150) is None
    with pytest.raises(ValueError):
        GroupScheduler(2, 0, 0)


def test_group_seeds_are_reproducible_and_distinct():
    seeds = [group_seed(123, g) for g in range(1000)]
    assert seeds == [group_seed(123, g) for g in range(1000)]
    assert len(set(seeds)) == 1000
    assert group_seed(124, 0) != seeds[0]


def test_hook_class_pickles_by_reference_and_rebuilds_in_a_fresh_module_state():
    cls = group_reset_class(Monitor)
    assert group_reset_class(Monitor) is cls
    assert pickle.loads(pickle.dumps(cls)) is cls
    # a worker process has an empty cache: the module's __getattr__ rebuilds the class from its name
    env_hooks._classes.clear()
    rebuilt = getattr(env_hooks, cls.__name__)
    assert rebuilt.__mro__[1] is Monitor


def test_hook_uses_the_scheduled_seed_once_and_reports_it():
    env = Monitor(gym.make("CartPole-v1"))
    env.__class__ = group_reset_class(Monitor)
    env.sb3_grpo_schedule_reset(42, 7)
    obs, info = env.reset(seed=1)  # the scheduled seed wins over the given one
    expected, _ = gym.make("CartPole-v1").reset(seed=42)
    np.testing.assert_array_equal(obs, expected)
    assert info[INFO_KEY] == (7, 42, observation_digest(obs))
    _, info = env.reset()
    assert INFO_KEY not in info  # one-shot
    env.sb3_grpo_schedule_reset(3, 1)
    env.sb3_grpo_schedule_reset(None, -1)  # cancelled
    assert INFO_KEY not in env.reset()[1]


def test_install_is_idempotent_and_keeps_isinstance():
    venv = make_vec_env("CartPole-v1", n_envs=2)
    install_group_reset(venv)
    classes = venv.get_attr("__class__")
    install_group_reset(venv)
    assert venv.get_attr("__class__") == classes
    assert all(isinstance(e, Monitor) for e in venv.envs)


def test_locally_defined_env_class_is_refused_clearly():
    class Local(gym.Wrapper):
        pass

    with pytest.raises(TypeError, match="module level"):
        group_reset_class(Local)
