"""Oracle tests for the built-in reward functions and their combination."""

import numpy as np
import pytest

from sb3_grpo import Trajectory, get_reward_function
from sb3_grpo.common.reward_scoring import RewardCombiner, RewardFunctionError, score_trajectory


def traj(rewards, infos=None, terminated=True, truncated=False, gamma=0.5, group=0, member=0, index=0):
    rewards = np.asarray(rewards, dtype=np.float64)
    n = len(rewards)
    return Trajectory(
        observations=np.zeros((n, 2)),
        actions=np.zeros((n, 1)),
        rewards=rewards,
        infos=infos if infos is not None else [{} for _ in range(n)],
        terminated=terminated,
        truncated=truncated,
        gamma=gamma,
        group_id=group,
        member=member,
        index=index,
    )


def test_builtin_reward_functions_by_hand():
    t = traj([1.0, 2.0, 4.0], infos=[{}, {}, {"is_success": True}])
    np.testing.assert_allclose(score_trajectory(get_reward_function("episodic_return"), t), [1, 2, 4])
    # gamma 0.5: 1 + .5*2 + .25*4 = 3, per step
    np.testing.assert_allclose(score_trajectory(get_reward_function("discounted_return"), t), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(score_trajectory(get_reward_function("success"), t), [0, 0, 1.0])
    np.testing.assert_allclose(score_trajectory(get_reward_function("terminal_reward"), t), [0, 0, 4.0])
    failed = traj([1.0], infos=[{"is_success": False}])
    assert score_trajectory(get_reward_function("success"), failed).sum() == 0.0


def test_success_without_is_success_says_what_to_do():
    with pytest.raises(RewardFunctionError, match=r"'success'.*no 'is_success' key"):
        score_trajectory(get_reward_function("success"), traj([1.0]), name="success")


def minus_healthy_reward():
    """episodic_return weighted 1 and healthy_reward weighted -1."""
    names = ("episodic_return", "healthy_reward")
    return RewardCombiner([(name, get_reward_function(name)) for name in names], weights=[1.0, -1.0])


def test_healthy_reward_by_hand_and_removed_with_a_negative_weight():
    infos = [{"reward_survive": 1.0}, {"reward_survive": 1.0}, {"reward_survive": 0.5}]
    t = traj([1.25, 0.5, 2.0], infos=infos)
    np.testing.assert_allclose(score_trajectory(get_reward_function("healthy_reward"), t), [1.0, 1.0, 0.5])
    combiner = minus_healthy_reward()
    outcomes, steps, _ = combiner([t])
    np.testing.assert_allclose(steps[0], [0.25, -0.5, 1.5])
    np.testing.assert_allclose(outcomes, [1.25])


def _mujoco_rollout(env_id, steps=30):
    """Up to ``steps`` random-action steps of a MuJoCo env: (rewards, infos)."""
    gym = pytest.importorskip("gymnasium")
    pytest.importorskip("mujoco")
    env = gym.make(env_id)
    env.reset(seed=0)
    rewards, infos = [], []
    rng = np.random.default_rng(0)
    for _ in range(steps):
        _, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, size=env.action_space.shape).astype(np.float32))
        rewards.append(reward)
        infos.append(info)
        if terminated or truncated:
            break
    return rewards, infos


def test_healthy_reward_on_hopper_leaves_forward_and_control_rewards():
    rewards, infos = _mujoco_rollout("Hopper-v5")
    t = traj(rewards, infos=infos)
    combiner = minus_healthy_reward()
    _, steps, _ = combiner([t])
    expected = [info["reward_forward"] + info["reward_ctrl"] for info in infos]
    np.testing.assert_allclose(steps[0], expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(score_trajectory(get_reward_function("without_healthy_reward"), t), steps[0], atol=1e-12)


def test_without_healthy_reward_and_the_streams_of_each_function():
    t = traj([1.25, 0.5, 2.0], infos=[{"reward_survive": 1.0}, {"reward_survive": 1.0}, {"reward_survive": 0.5}])
    np.testing.assert_allclose(score_trajectory(get_reward_function("without_healthy_reward"), t), [0.25, -0.5, 1.5])
    names = ("without_healthy_reward", "healthy_reward")
    for aggregation in ("sum_then_normalize", "normalize_then_sum"):
        other = traj([1.0, 3.0], infos=[{"reward_survive": 1.0}] * 2, member=1, index=1)
        combiner = RewardCombiner([(n, get_reward_function(n)) for n in names], [2.0, 0.5], aggregation=aggregation)
        outcomes, steps, _, streams = combiner.score([t, other])
        assert len(streams) == 2 and all(len(s) == 2 for s in streams)
        for i in range(2):
            np.testing.assert_allclose(streams[0][i] + streams[1][i], steps[i])
        assert combiner([t, other])[0].tolist() == outcomes.tolist()
    plain = RewardCombiner([(n, get_reward_function(n)) for n in names], [2.0, 0.5])
    _, _, _, streams = plain.score([t])
    np.testing.assert_allclose(streams[0][0], [0.5, -1.0, 3.0])
    np.testing.assert_allclose(streams[1][0], [0.5, 0.5, 0.25])


def test_healthy_reward_on_an_env_without_one_says_what_to_do():
    bad = traj([1.0, 1.0], infos=[{"reward_survive": 1}, {}])
    for name in ("healthy_reward", "without_healthy_reward"):
        with pytest.raises(
            RewardFunctionError,
            match=rf"'{name}'.*step 1's info has no 'reward_survive' key.*Remove 'healthy_reward' and 'without_healthy",
        ):
            score_trajectory(get_reward_function(name), bad, name=name)


def test_forward_and_cost_reward_by_hand():
    infos = [
        {"reward_forward": 2.0, "reward_survive": 1.0},
        {"reward_forward": -0.5, "reward_survive": 1.0},
        {"reward_forward": 0.25, "reward_survive": 0.0},
    ]
    t = traj([2.75, 0.25, 0.0], infos=infos)  # env reward = forward + survive + cost, cost = -0.25 each step
    np.testing.assert_allclose(score_trajectory(get_reward_function("forward_reward"), t), [2.0, -0.5, 0.25])
    np.testing.assert_allclose(score_trajectory(get_reward_function("cost_reward"), t), [-0.25, -0.25, -0.25])
    no_survival = traj([1.5, -1.0], infos=[{"reward_forward": 2.0}, {"reward_forward": -0.75}])  # HalfCheetah-like
    np.testing.assert_allclose(score_trajectory(get_reward_function("cost_reward"), no_survival), [-0.5, -0.25])
    # Weighted 1.5 / 1 / 1, the step rewards are the env reward plus half the forward reward: costs are not scaled.
    names = ("forward_reward", "cost_reward", "healthy_reward")
    combiner = RewardCombiner([(n, get_reward_function(n)) for n in names], weights=[1.5, 1.0, 1.0])
    _, steps, _ = combiner([t])
    np.testing.assert_allclose(steps[0], [2.75 + 1.0, 0.25 - 0.25, 0.0 + 0.125])


def test_moving_healthy_reward_by_hand():
    """The survival bonus times the forward reward clipped to [0, 1]: in full from 1 on, in part below, none standing
    or going back; an env without a survival bonus is named."""
    infos = [{"reward_forward": v, "reward_survive": 1.0} for v in (2.0, 0.4, 0.0, -0.5)]
    t = traj([3.0, 1.4, 1.0, 0.5], infos=infos)
    np.testing.assert_allclose(score_trajectory(get_reward_function("moving_healthy_reward"), t), [1.0, 0.4, 0.0, 0.0])
    with pytest.raises(RewardFunctionError, match=r"no 'reward_survive' key"):
        score_trajectory(get_reward_function("moving_healthy_reward"), traj([1.0], infos=[{"reward_forward": 1.0}]))


@pytest.mark.parametrize("env_id", ["Hopper-v5", "HalfCheetah-v5"])
def test_forward_cost_and_healthy_reward_sum_to_the_mujoco_reward(env_id):
    rewards, infos = _mujoco_rollout(env_id)
    t = traj(rewards, infos=infos)
    forward = score_trajectory(get_reward_function("forward_reward"), t)
    cost = score_trajectory(get_reward_function("cost_reward"), t)
    np.testing.assert_allclose(forward, [info["reward_forward"] for info in infos])
    np.testing.assert_allclose(cost, [info["reward_ctrl"] for info in infos], atol=1e-6)  # no contact cost here
    assert (cost <= 0).all()
    survive = [info.get("reward_survive", 0.0) for info in infos]
    np.testing.assert_allclose(forward + cost + np.asarray(survive), rewards, atol=1e-6)


def test_forward_reward_on_an_env_without_one_says_what_to_do():
    bad = traj([1.0, 1.0], infos=[{"reward_forward": 1.0}, {}])
    for name in ("forward_reward", "cost_reward"):
        with pytest.raises(
            RewardFunctionError,
            match=rf"'{name}'.*step 1's info has no 'reward_forward' key.*Remove 'forward_reward' and 'cost_reward'",
        ):
            score_trajectory(get_reward_function(name), bad, name=name)


def test_non_finite_and_wrong_shape_name_function_and_trajectory():
    bad = traj([1.0, 1.0], group=3, member=2, index=11)
    with pytest.raises(RewardFunctionError, match=r"'nan_fn'.*non-finite.*trajectory 11 \(group 3, member 2, length 2"):
        score_trajectory(lambda t: float("nan"), bad, name="nan_fn")
    with pytest.raises(RewardFunctionError, match=r"'inf_fn'.*non-finite"):
        score_trajectory(lambda t: np.array([0.0, np.inf]), bad, name="inf_fn")
    with pytest.raises(RewardFunctionError, match=r"'shape_fn' returned shape \(3,\).*shape \(2,\)"):
        score_trajectory(lambda t: np.zeros(3), bad, name="shape_fn")
    with pytest.raises(RewardFunctionError, match=r"'boom' raised on trajectory 11"):
        score_trajectory(lambda t: 1 / 0, bad, name="boom")


def test_combination_sum_then_normalize():
    ts = [traj([1.0, 1.0], infos=[{}, {"is_success": i == 0}], group=0, member=i, index=i) for i in range(2)]
    combiner = RewardCombiner(
        [("episodic_return", get_reward_function("episodic_return")), ("success", get_reward_function("success"))],
        weights=[1.0, 10.0],
    )
    outcomes, steps, raw = combiner(ts)
    np.testing.assert_allclose(outcomes, [2 + 10, 2 + 0])
    np.testing.assert_allclose(steps[0], [1, 11])
    np.testing.assert_allclose(raw, [[2, 2], [1, 0]])


def test_combination_normalize_then_sum():
    # Group 0: returns (1, 3) -> z (-1, 1); lengths (1, 2) -> z (-1, 1). Group 1 is flat -> 0.
    ts = [
        traj([1.0], group=0, index=0),
        traj([1.0, 2.0], group=0, index=1),
        traj([5.0], group=1, index=2),
        traj([5.0], group=1, index=3),
    ]
    fns = [("episodic_return", get_reward_function("episodic_return")), ("length", lambda t: float(t.length))]
    outcomes, steps, _ = RewardCombiner(fns, weights=[1.0, 0.5], aggregation="normalize_then_sum", eps=1e-12)(ts)
    np.testing.assert_allclose(outcomes, [-1.5, 1.5, 0.0, 0.0], atol=1e-9)
    # step rewards carry the per-function scale (1/std), so within a group they differ from the outcome by a constant
    np.testing.assert_allclose(steps[1].sum() - steps[0].sum(), outcomes[1] - outcomes[0], atol=1e-9)
    assert np.all(steps[2] == 0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(functions=[]), "reward_functions is empty"),
        (dict(weights=[1.0, 2.0]), "one weight per function"),
        (dict(weights=[float("nan")]), "must be finite"),
        (dict(aggregation="max"), "reward_aggregation must be one of"),
    ],
)
def test_combiner_refuses_bad_configuration(kwargs, match):
    params = dict(functions=[("episodic_return", get_reward_function("episodic_return"))])
    params.update(kwargs)
    with pytest.raises(RewardFunctionError, match=match):
        RewardCombiner(**params)
