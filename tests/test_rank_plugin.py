"""The rank plugin distribution (plugins/sb3-grpo-rank-plugin): skipped unless it is installed."""

import numpy as np
import pytest

rank_plugin = pytest.importorskip("sb3_grpo_rank_plugin")

from sb3_grpo_rank_plugin import GroupRank, action_smoothness, average_ranks, survival_bonus  # noqa: E402

import sb3_grpo  # noqa: E402
from sb3_grpo import AdvantageInputs, Trajectory  # noqa: E402


def _outcomes(rewards, groups):
    return AdvantageInputs.from_trajectories([np.array([r]) for r in rewards], gamma=0.99, group_ids=np.asarray(groups))


def _trajectory(actions, terminated=True, truncated=False):
    actions = np.asarray(actions)
    n = len(actions)
    return Trajectory(
        observations=np.zeros((n, 1)),
        actions=actions,
        rewards=np.ones(n),
        infos=[{}] * n,
        terminated=terminated,
        truncated=truncated,
    )


def test_average_ranks_by_hand():
    np.testing.assert_allclose(average_ranks(np.array([3.0, 10.0, 3.0, 0.0])), [2.5, 4.0, 2.5, 1.0])
    np.testing.assert_allclose(average_ranks(np.array([5.0, 5.0, 5.0])), [2.0, 2.0, 2.0])


def test_group_rank_by_hand():
    # group 0: (3, 10, 3, 0) -> ranks (2.5, 4, 2.5, 1) -> centred (0, 1.5, 0, -1.5) -> / 1.5
    # group 1: flat -> 0; group 2: a single member -> 0
    out = GroupRank().compute(_outcomes([3, 10, 3, 0, 7, 7, 1], [0, 0, 0, 0, 1, 1, 2]))
    np.testing.assert_allclose(out.advantages[0], [0, 1, 0, -1, 0, 0, 0])
    assert out.returns is None
    raw = GroupRank(scale="none").compute(_outcomes([1, 2, 4], [0, 0, 0])).advantages[0]
    np.testing.assert_allclose(raw, [-1, 0, 1])
    std = GroupRank(scale="std").compute(_outcomes([1, 2, 4], [0, 0, 0])).advantages[0]
    np.testing.assert_allclose(std, np.array([-1, 0, 1]) / np.std([-1, 0, 1]))


def test_group_rank_is_invariant_to_monotone_transforms_and_broadcasts():
    rewards = np.array([0.1, 5.0, -3.0, 2.0])
    a = GroupRank().compute(_outcomes(rewards, [0] * 4)).advantages
    b = GroupRank().compute(_outcomes(np.exp(rewards) * 100, [0] * 4)).advantages
    np.testing.assert_allclose(a, b)
    inputs = AdvantageInputs.from_trajectories(
        [np.zeros(3), np.zeros(1)], gamma=1.0, outcome_rewards=np.array([1.0, 0.0]), group_ids=np.array([0, 0])
    )
    np.testing.assert_allclose(GroupRank().compute(inputs).advantages, [[1, -1], [1, 0], [1, 0]])


def test_group_rank_rejects_unknown_scale():
    with pytest.raises(ValueError, match="scale"):
        GroupRank(scale="group")


def test_reward_functions_by_hand():
    np.testing.assert_allclose(survival_bonus(_trajectory([0, 1, 1])), [1, 1, 0])
    np.testing.assert_allclose(survival_bonus(_trajectory([0, 1, 1], terminated=False, truncated=True)), [1, 1, 1])
    assert action_smoothness(_trajectory([0, 1, 1, 0])) == pytest.approx(-2 / 3)
    assert action_smoothness(_trajectory([1])) == 0.0
    continuous = _trajectory(np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 4.0]]))
    assert action_smoothness(continuous) == pytest.approx(-2.5)


def test_registered_through_the_entry_point():
    names = [p["name"] for p in sb3_grpo.list_plugins()]
    assert "rank" in names
    assert isinstance(sb3_grpo.get_advantage_estimator("group_rank"), GroupRank)
    assert sb3_grpo.get_advantage_estimator("group_rank", scale="std").scale == "std"
    assert sb3_grpo.get_reward_function("survival_bonus") is survival_bonus
    assert sb3_grpo.get_reward_function("action_smoothness") is action_smoothness


def test_grpo_trains_with_the_plugin_by_name():
    from sb3_grpo import GRPO

    model = GRPO(
        "MlpPolicy",
        "CartPole-v1",
        advantage_estimator="group_rank",
        reward_functions=["survival_bonus", "action_smoothness"],
        reward_weights=[1.0, 5.0],
        group_size=4,
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        seed=0,
        device="cpu",
    )
    model.learn(256)
    assert model.num_timesteps >= 256
