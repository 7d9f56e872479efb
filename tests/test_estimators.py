"""Oracle tests for every built-in advantage estimator: hand-computed values, SB3 side by side, invariances."""

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from stable_baselines3.common.buffers import RolloutBuffer

from sb3_grpo import AdvantageInputs, AdvantageOutputs, get_advantage_estimator
from sb3_grpo.common.advantages import EstimatorError, check_estimator_needs, group_index, run_estimator

# A 3-step single-column rollout used by the hand computations below.
R = [1.0, 2.0, 3.0]
V = [0.5, 1.0, 1.5]


def critic_inputs(starts=(1, 0, 0), last=2.0, done=False, gamma=0.9, lam=0.8):
    return AdvantageInputs(
        rewards=np.array(R, dtype=np.float32)[:, None],
        episode_starts=np.array(starts, dtype=np.float32)[:, None],
        values=np.array(V, dtype=np.float32)[:, None],
        last_values=np.array([last], dtype=np.float32),
        dones=np.array([done]),
        gamma=gamma,
        gae_lambda=lam,
    )


def adv(name, inputs, **kwargs):
    return run_estimator(get_advantage_estimator(name, **kwargs), inputs)


@pytest.mark.parametrize(
    "starts, done, expected",
    [
        # d2 = 3 + .9*2 - 1.5 = 3.3; d1 = 2 + .9*1.5 - 1 = 2.35; d0 = 1 + .9*1 - .5 = 1.4; gl = .72
        ((1, 0, 0), False, [1.4 + 0.72 * (2.35 + 0.72 * 3.3), 2.35 + 0.72 * 3.3, 3.3]),
        # episode ends at the last step: d2 = 3 - 1.5
        ((1, 0, 0), True, [1.4 + 0.72 * (2.35 + 0.72 * 1.5), 2.35 + 0.72 * 1.5, 1.5]),
        # a new episode starts at row 2, so step 1 was terminal: d1 = 2 - 1
        ((1, 0, 1), False, [1.4 + 0.72 * 1.0, 1.0, 3.3]),
    ],
)
def test_gae_by_hand(starts, done, expected):
    out = adv("gae", critic_inputs(starts=starts, done=done))
    np.testing.assert_allclose(out.advantages[:, 0], expected, rtol=1e-6)
    np.testing.assert_allclose(out.returns[:, 0], np.array(expected) + np.array(V), rtol=1e-6)


def test_gae_lambda_option_overrides_algorithm():
    out = adv("gae", critic_inputs(lam=0.3), gae_lambda=0.0)
    np.testing.assert_allclose(out.advantages[:, 0], [1.4, 2.35, 3.3], rtol=1e-6)


def test_td_and_monte_carlo_by_hand():
    np.testing.assert_allclose(adv("td", critic_inputs()).advantages[:, 0], [1.4, 2.35, 3.3], rtol=1e-6)
    # MC from step 0: 1 + .9*2 + .81*3 + .729*V(next)=2 -> 6.688, minus V0 = .5
    np.testing.assert_allclose(adv("monte_carlo", critic_inputs()).advantages[:, 0], [6.188, 5.32, 3.3], rtol=1e-6)


@pytest.mark.parametrize(
    "starts, expected_returns",
    [
        # G0 = 1 + .9*2 + .81*V2 ; G1 = 2 + .9*3 + .81*last ; G2 = 3 + .9*last (rollout ends)
        ((1, 0, 0), [1 + 1.8 + 0.81 * 1.5, 2 + 2.7 + 0.81 * 2.0, 3 + 1.8]),
        # step 1 terminal: G0 = 1 + .9*2 (no bootstrap) ; G1 = 2
        ((1, 0, 1), [1 + 1.8, 2.0, 3 + 1.8]),
    ],
)
def test_n_step_by_hand(starts, expected_returns):
    out = adv("n_step", critic_inputs(starts=starts), n=2)
    np.testing.assert_allclose(out.returns[:, 0], expected_returns, rtol=1e-6)
    np.testing.assert_allclose(out.advantages[:, 0], np.array(expected_returns) - np.array(V), rtol=1e-6)


def random_rollout(rng, n_steps=37, n_envs=4):
    rewards = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    values = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    starts = (rng.random((n_steps, n_envs)) < 0.15).astype(np.float32)
    starts[0] = 1.0
    last_values = rng.normal(size=n_envs).astype(np.float32)
    dones = rng.random(n_envs) < 0.5
    return rewards, values, starts, last_values, dones


@pytest.mark.parametrize("seed", range(5))
def test_gae_equals_sb3_rollout_buffer(seed):
    rng = np.random.default_rng(seed)
    n_steps, n_envs, gamma, lam = 37, 4, 0.97, 0.91
    rewards, values, starts, last_values, dones = random_rollout(rng, n_steps, n_envs)
    buffer = RolloutBuffer(n_steps, spaces.Box(-1, 1, (2,)), spaces.Discrete(2), gamma=gamma, gae_lambda=lam, n_envs=n_envs)
    for t in range(n_steps):
        buffer.add(
            np.zeros((n_envs, 2)), np.zeros((n_envs, 1)), rewards[t], starts[t], th.as_tensor(values[t]), th.zeros(n_envs)
        )
    buffer.compute_returns_and_advantage(last_values=th.as_tensor(last_values), dones=dones)

    ours = adv(
        "gae",
        AdvantageInputs(
            rewards=rewards,
            episode_starts=starts,
            values=values,
            last_values=last_values,
            dones=dones,
            gamma=gamma,
            gae_lambda=lam,
        ),
    )
    np.testing.assert_allclose(ours.advantages, buffer.advantages, atol=1e-6, rtol=0)
    np.testing.assert_allclose(ours.returns, buffer.returns, atol=1e-6, rtol=0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(40, 60), gamma=st.floats(0.5, 0.999))
def test_critic_estimators_agree_at_their_limits(seed, n, gamma):
    """n_step with k >= T is Monte Carlo; GAE(0) is TD; GAE(1) is Monte Carlo."""
    rng = np.random.default_rng(seed)
    rewards, values, starts, last_values, dones = random_rollout(rng, n_steps=37)
    inputs = AdvantageInputs(
        rewards=rewards,
        episode_starts=starts,
        values=values,
        last_values=last_values,
        dones=dones,
        gamma=gamma,
        gae_lambda=0.5,
    )
    mc = adv("monte_carlo", inputs)
    np.testing.assert_allclose(adv("n_step", inputs, n=n).returns, mc.returns, atol=1e-4)
    np.testing.assert_allclose(adv("gae", inputs, gae_lambda=1.0).advantages, mc.advantages, atol=1e-6)
    np.testing.assert_allclose(adv("gae", inputs, gae_lambda=0.0).advantages, adv("td", inputs).advantages, atol=1e-6)
    np.testing.assert_allclose(adv("n_step", inputs, n=1).advantages, adv("td", inputs).advantages, atol=1e-5)
    for name in ("gae", "td", "monte_carlo", "n_step"):
        assert np.all(np.isfinite(adv(name, inputs).advantages))


# -------------------------------------------------------------------------
# Group estimators
# -------------------------------------------------------------------------

OUTCOMES = np.array([1.0, 3.0, 5.0, 2.0, 2.0])
GROUPS = np.array([0, 0, 0, 1, 1])


def group_inputs(outcomes=OUTCOMES, groups=GROUPS, lengths=None, step_rewards=None, gamma=0.9):
    if step_rewards is None:
        lengths = lengths or [2] * len(outcomes)
        step_rewards = [np.r_[np.zeros(n - 1), r] for n, r in zip(lengths, outcomes, strict=True)]
    return AdvantageInputs.from_trajectories(step_rewards, gamma=gamma, outcome_rewards=np.asarray(outcomes), group_ids=groups)


def per_trajectory(out, inputs):
    """The advantage of each trajectory, checking it is the same on all its steps and zero on padding."""
    a = out.advantages
    valid = inputs.valid
    assert np.all(a[~valid] == 0)
    first = a[0]
    assert np.allclose(np.where(valid, a - first[None, :], 0), 0)
    return first


def test_group_zscore_by_hand():
    inputs = group_inputs(lengths=[1, 3, 2, 2, 4])
    std = np.sqrt(8 / 3)  # population std of (1, 3, 5)
    expected = [-2 / (std + 1e-4), 0.0, 2 / (std + 1e-4), 0.0, 0.0]
    np.testing.assert_allclose(per_trajectory(adv("group_zscore", inputs), inputs), expected, rtol=1e-9)


def test_group_mean_and_leave_one_out_by_hand():
    inputs = group_inputs()
    np.testing.assert_allclose(per_trajectory(adv("group_mean", inputs), inputs), [-2, 0, 2, 0, 0])
    # R_i - mean of the others: 1 - 4, 3 - 3, 5 - 2, 2 - 2, 2 - 2
    np.testing.assert_allclose(per_trajectory(adv("leave_one_out", inputs), inputs), [-3, 0, 3, 0, 0])


def test_group_scale_options():
    inputs = group_inputs()
    centered = np.array([-2, 0, 2, 0, 0.0])
    np.testing.assert_allclose(
        per_trajectory(adv("group_mean", inputs, scale="batch", eps=1e-12), inputs), centered / centered.std(), rtol=1e-9
    )
    np.testing.assert_allclose(per_trajectory(adv("group_zscore", inputs, scale="none"), inputs), centered)


def test_all_equal_groups_give_exact_zero_never_nan():
    inputs = group_inputs(
        outcomes=np.full(6, 0.3), groups=np.array([0, 0, 0, 1, 1, 1]), step_rewards=[np.full(3, 0.1) for _ in range(6)]
    )
    for name in ("group_zscore", "group_mean", "leave_one_out", "group_process", "group_step_baseline"):
        if name == "group_process":
            with pytest.warns(UserWarning, match="every advantage is zero"):
                out = adv(name, inputs)
        else:
            out = adv(name, inputs)
        assert np.all(out.advantages == 0.0), name


def test_group_process_by_hand():
    # One group, two trajectories: a = [1, 0], b = [0]. Steps (1, 0, 0): mean 1/3, population std sqrt(2/9).
    inputs = group_inputs(outcomes=[1.0, 0.0], groups=np.array([0, 0]), step_rewards=[np.array([1.0, 0.0]), np.array([0.0])])
    s = np.sqrt(2 / 9) + 1e-4
    out = adv("group_process", inputs)
    np.testing.assert_allclose(out.advantages[:, 0], [(2 / 3 - 1 / 3) / s, (-1 / 3) / s], rtol=1e-9)
    np.testing.assert_allclose(out.advantages[:, 1], [(-1 / 3) / s, 0.0], rtol=1e-9)
    discounted = adv("group_process", inputs, discounted=True)  # gamma 0.9
    np.testing.assert_allclose(discounted.advantages[0, 0], (2 / 3 - 0.9 / 3) / s, rtol=1e-9)


def test_group_step_baseline_by_hand():
    # gamma .5; a = [1, 1] -> G = [1.5, 1]; b = [0, 2, 4] -> G = [2, 4, 4]
    inputs = group_inputs(
        outcomes=[2.0, 6.0], groups=np.array([7, 7]), step_rewards=[np.array([1.0, 1.0]), np.array([0.0, 2.0, 4.0])], gamma=0.5
    )
    out = adv("group_step_baseline", inputs, scale="none")
    np.testing.assert_allclose(out.advantages[:, 0], [-0.5, -3.0, 0.0])
    np.testing.assert_allclose(out.advantages[:, 1], [0.5, 3.0, 0.0])  # alone at t=2: zero
    scaled = adv("group_step_baseline", inputs)
    valid = np.array([-0.5, -3.0, 0.5, 3.0, 0.0])
    np.testing.assert_allclose(scaled.advantages[:, 1], np.array([0.5, 3.0, 0.0]) / valid.std(), rtol=1e-6)


def test_group_step_baseline_floored_scale_by_hand():
    """scale='floored' divides by the larger of the batch's std and the std of every advantage so far."""
    est = get_advantage_estimator("group_step_baseline", scale="floored", eps=0.0)
    # gamma .5, as above: unscaled advantages [-.5, -3, .5, 3] (and a 0 where b is alone)
    first = group_inputs(
        outcomes=[2.0, 6.0], groups=np.array([7, 7]), step_rewards=[np.array([1.0, 1.0]), np.array([0.0, 2.0, 4.0])], gamma=0.5
    )
    a1 = np.array([-0.5, -3.0, 0.5, 3.0, 0.0])
    out = est.compute(first)
    np.testing.assert_allclose(out.advantages[:, 1], np.array([0.5, 3.0, 0.0]) / a1.std(), rtol=1e-12)  # = batch
    # A nearly tied batch: one step each, rewards 1.01 and 1 -> advantages +-.01, its own std tiny
    tied_steps = [np.array([1.01]), np.array([1.0])]
    tied = group_inputs(outcomes=[1.0, 1.0], groups=np.array([3, 3]), step_rewards=tied_steps, gamma=0.5)
    a2 = np.array([0.01, -0.01])
    running = np.concatenate([a1, a2]).std()  # count-weighted over both batches = the std of them all together
    assert running > a2.std()
    np.testing.assert_allclose(est.compute(tied).advantages[0], a2 / running, rtol=1e-12)
    assert est.running_count == 7 and est.running_var == pytest.approx(running**2, rel=1e-12)
    # A batch wider than everything so far: its own std is the larger, as scale='batch'
    wide_steps = [np.array([50.0]), np.array([-50.0])]
    wide = group_inputs(outcomes=[0.0, 0.0], groups=np.array([1, 1]), step_rewards=wide_steps, gamma=0.5)
    a3 = np.array([100.0, -100.0])
    assert np.concatenate([a1, a2, a3]).std() < a3.std()
    np.testing.assert_allclose(est.compute(wide).advantages[0], a3 / a3.std(), rtol=1e-12)
    np.testing.assert_allclose(est.running_var, np.concatenate([a1, a2, a3]).var(), rtol=1e-12)
    # the plain batch scale would have blown the tied batch up to unit size
    np.testing.assert_allclose(np.abs(adv("group_step_baseline", tied).advantages[0]), [1.0, 1.0], rtol=1e-6)
    # floor=0.25: the tied batch is divided by a quarter of the running std (still above its own)
    quarter = get_advantage_estimator("group_step_baseline", scale="floored", floor=0.25, eps=0.0)
    quarter.compute(first)
    assert 0.25 * running > a2.std()
    np.testing.assert_allclose(quarter.compute(tied).advantages[0], a2 / (0.25 * running), rtol=1e-12)


def random_step_batch(seed, n_groups, size):
    """``n_groups`` groups of ``size`` trajectories of 1-11 normal per-step rewards (gamma 0.95)."""
    rng = np.random.default_rng(seed)
    steps = [rng.normal(size=rng.integers(1, 12)) for _ in range(n_groups * size)]
    ids = np.repeat(np.arange(n_groups), size)
    return rng, steps, ids, AdvantageInputs.from_trajectories(steps, gamma=0.95, group_ids=ids)


def test_group_step_baseline_lambda_by_hand():
    # As above (gamma .5). Leave-one-out baselines: a sees b's G = [2, 4]; b sees a's G = [1.5, 1], then is alone
    # (baseline = its own G, 4). deltas: a = [1 + .5*4 - 2, 1 + 0 - 4] = [1, -3]; b = [0 + .5*1 - 1.5, 2 + .5*4 - 1,
    # flat (alone): 0] = [-1, 3, 0].
    inputs = group_inputs(
        outcomes=[2.0, 6.0], groups=np.array([7, 7]), step_rewards=[np.array([1.0, 1.0]), np.array([0.0, 2.0, 4.0])], gamma=0.5
    )
    zero = adv("group_step_baseline", inputs, scale="none", lam=0.0)
    np.testing.assert_allclose(zero.advantages[:, 0], [1.0, -3.0, 0.0])
    np.testing.assert_allclose(zero.advantages[:, 1], [-1.0, 3.0, 0.0])
    half = adv("group_step_baseline", inputs, scale="none", lam=0.5)  # gamma * lam = .25
    np.testing.assert_allclose(half.advantages[:, 0], [1.0 - 0.25 * 3.0, -3.0, 0.0])
    np.testing.assert_allclose(half.advantages[:, 1], [-1.0 + 0.25 * 3.0, 3.0, 0.0])
    # lam -> 1 telescopes to G - b (the lam=1 path computes that directly)
    near = adv("group_step_baseline", inputs, scale="none", lam=1.0 - 1e-12)
    np.testing.assert_allclose(near.advantages, adv("group_step_baseline", inputs, scale="none").advantages, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_groups=st.integers(1, 4), size=st.integers(2, 5))
def test_group_step_baseline_lambda_telescopes(seed, n_groups, size):
    _, steps, ids, inputs = random_step_batch(seed, n_groups, size)
    plain = adv("group_step_baseline", inputs, scale="none").advantages
    near = adv("group_step_baseline", inputs, scale="none", lam=1.0 - 1e-12).advantages
    np.testing.assert_allclose(near, plain, atol=1e-8 * (1 + np.abs(plain).max()))
    # lam = 0: one-step deltas against the time-indexed leave-one-out baseline, recomputed here from scratch
    zero = adv("group_step_baseline", inputs, scale="none", lam=0.0).advantages
    g = [np.array([sum(0.95**k * r for k, r in enumerate(s[t:])) for t in range(len(s))]) for s in steps]

    def base(i, t):
        if t >= len(steps[i]):
            return 0.0
        alive = [g[j][t] for j in np.flatnonzero(ids == ids[i]) if t < len(steps[j])]
        others = [g[j][t] for j in np.flatnonzero(ids == ids[i]) if j != i and t < len(steps[j])]
        return g[i][t] if not others or max(alive) == min(alive) else float(np.mean(others))

    for i, s in enumerate(steps):
        expected = [s[t] + 0.95 * base(i, t + 1) - base(i, t) for t in range(len(s))]
        np.testing.assert_allclose(zero[: len(s), i], expected, atol=1e-9)


def test_group_step_baseline_lambda_equals_shorter_discount_when_members_end_together():
    rng = np.random.default_rng(3)
    steps = [rng.normal(size=n) for n in (7, 7, 7, 4, 4)]
    ids = np.array([0, 0, 0, 1, 1])
    lam_out = adv("group_step_baseline", AdvantageInputs.from_trajectories(steps, gamma=0.9, group_ids=ids), lam=0.5)
    short = adv("group_step_baseline", AdvantageInputs.from_trajectories(steps, gamma=0.45, group_ids=ids))
    np.testing.assert_allclose(lam_out.advantages, short.advantages, atol=1e-9)


def test_group_step_baseline_refuses_bad_lambda():
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(EstimatorError, match="lam must be in"):
            get_advantage_estimator("group_step_baseline", lam=bad)
    with pytest.raises(EstimatorError, match="scale must be 'batch', 'floored' or 'none', got 'group'"):
        get_advantage_estimator("group_step_baseline", scale="group")
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(EstimatorError, match="floor must be in"):
            get_advantage_estimator("group_step_baseline", scale="floored", floor=bad)
    with pytest.raises(EstimatorError, match=r"floor=0.5 needs scale='floored', got scale='batch'"):
        get_advantage_estimator("group_step_baseline", floor=0.5)


def two_stream_example():
    """Two members, two reward streams. Stream 1 (gamma .5): a = [1, 1], b = [0, 2, 4]; stream 2 (gamma 1):
    a = [1, 1], b = [1, 1, 1]. Returns ``(totals, inputs)``: each member's summed rewards, and the inputs with the
    streams (the algorithm's gamma, 0.9, is not theirs)."""
    first = [np.array([1.0, 1.0]), np.array([0.0, 2.0, 4.0])]
    second = [np.array([1.0, 1.0]), np.array([1.0, 1.0, 1.0])]
    totals = [f + g for f, g in zip(first, second, strict=True)]
    inputs = AdvantageInputs.from_trajectories(
        totals, gamma=0.9, group_ids=np.array([7, 7]), reward_streams=[(first, 0.5), (second, 1.0)]
    )
    return totals, inputs


def test_group_step_baseline_reward_streams_by_hand():
    # Rewards-to-go of two_stream_example: a = [1.5, 1] + [2, 1] = [3.5, 2]; b = [2, 4, 4] + [3, 2, 1] = [5, 6, 5].
    # Leave-one-out: a - b = [-1.5, -4]; b - a = [1.5, 4], then alone (0).
    totals, inputs = two_stream_example()
    out = adv("group_step_baseline", inputs, scale="none")
    np.testing.assert_allclose(out.advantages[:, 0], [-1.5, -4.0, 0.0])
    np.testing.assert_allclose(out.advantages[:, 1], [1.5, 4.0, 0.0])
    # the algorithm's gamma (0.9) is not used when streams are given
    plain = adv("group_step_baseline", AdvantageInputs.from_trajectories(totals, gamma=0.9, group_ids=np.array([7, 7])))
    assert not np.allclose(plain.advantages, adv("group_step_baseline", inputs).advantages)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_groups=st.integers(1, 3), size=st.integers(2, 4))
def test_group_step_baseline_streams_with_one_discount_equal_the_summed_rewards(seed, n_groups, size):
    rng, steps, ids, inputs = random_step_batch(seed, n_groups, size)
    parts = [rng.normal(size=len(s)) for s in steps]
    rest = [s - p for s, p in zip(steps, parts, strict=True)]
    split = AdvantageInputs.from_trajectories(steps, gamma=0.95, group_ids=ids, reward_streams=[(parts, 0.95), (rest, 0.95)])
    for scale in ("none", "batch"):
        np.testing.assert_allclose(
            adv("group_step_baseline", split, scale=scale).advantages,
            adv("group_step_baseline", inputs, scale=scale).advantages,
            atol=1e-9,
        )


def test_group_step_baseline_reward_streams_need_lam_one_and_matching_shapes():
    steps = [np.array([1.0, 2.0]), np.array([0.5])]
    ids = np.array([0, 0])
    streams = AdvantageInputs.from_trajectories(steps, gamma=0.9, group_ids=ids, reward_streams=[(steps, 0.5)])
    estimator = get_advantage_estimator("group_step_baseline", lam=0.9)
    assert not estimator.accepts_reward_streams
    assert get_advantage_estimator("group_step_baseline").accepts_reward_streams
    assert not getattr(get_advantage_estimator("group_zscore"), "accepts_reward_streams", False)
    with pytest.raises(EstimatorError, match=r"needs lam=1, got lam=0\.9"):
        estimator.compute(streams)
    streams.extras["reward_streams"] = [(np.zeros((3, 2)), 0.5)]
    with pytest.raises(EstimatorError, match=r"a reward stream has shape \(3, 2\), the rewards \(2, 2\)"):
        get_advantage_estimator("group_step_baseline").compute(streams)


def test_group_step_baseline_stream_scale_each_by_hand():
    # two_stream_example, each stream's leave-one-out advantages first: stream 1 (gamma .5) a = [-.5, -3],
    # b = [.5, 3, 0] (std over the 5 steps sqrt(18.5 / 5)); stream 2 (gamma 1) a = [-1, -1], b = [1, 1, 0]
    # (std sqrt(4 / 5)). With stream_scale="each" each is divided by its own std, then they are summed.
    _, inputs = two_stream_example()
    one, two = np.sqrt(18.5 / 5), np.sqrt(4 / 5)
    out = adv("group_step_baseline", inputs, scale="none", stream_scale="each")
    np.testing.assert_allclose(out.advantages[:, 0], [-0.5 / one - 1 / two, -3 / one - 1 / two, 0.0])
    np.testing.assert_allclose(out.advantages[:, 1], [0.5 / one + 1 / two, 3 / one + 1 / two, 0.0])
    # "joint" (the default) is the summed streams of the test above
    joint = adv("group_step_baseline", inputs, scale="none", stream_scale="joint")
    np.testing.assert_allclose(joint.advantages[:, 0], [-1.5, -4.0, 0.0])
    # the batch scale then applies to the sum as before
    scaled = adv("group_step_baseline", inputs, stream_scale="each").advantages
    np.testing.assert_allclose(scaled, out.advantages / (out.advantages[inputs.valid].std() + 1e-8))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_groups=st.integers(2, 3), size=st.integers(3, 4), factor=st.floats(1e-3, 1e3))
def test_group_step_baseline_stream_scale_each_ignores_each_streams_size(seed, n_groups, size, factor):
    """With "each" a stream multiplied by any positive factor gives the same advantages (each stream has the same
    say); summed as they are, the larger stream decides."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 12, size=n_groups * size)
    ids = np.repeat(np.arange(n_groups), size)
    speed = [rng.normal(size=n) for n in lengths]
    alive = [rng.normal(size=n) for n in lengths]

    def advantages(stream_scale, k):
        bigger = [k * a for a in alive]
        totals = [a + b for a, b in zip(speed, bigger, strict=True)]
        inputs = AdvantageInputs.from_trajectories(
            totals, gamma=0.9, group_ids=ids, reward_streams=[(speed, 0.9), (bigger, 0.99)]
        )
        return adv("group_step_baseline", inputs, stream_scale=stream_scale).advantages

    np.testing.assert_allclose(advantages("each", factor), advantages("each", 1.0), atol=1e-8)
    assume(abs(np.log(factor)) > 1.0)
    joint, each = advantages("joint", factor), advantages("each", factor)
    assert np.abs(joint).max() > 0 and not np.allclose(joint, each, atol=1e-3)


def test_group_step_baseline_stream_scale_each_skips_a_stream_without_differences():
    """A survival bonus that every member earns on every step (all alive to the end) has no advantage: it adds
    nothing, also not rounding noise blown up by a zero standard deviation."""
    speed = [np.array([1.0, 0.5, 2.0]), np.array([0.3, 0.7, 0.1])]
    alive = [np.full(3, 0.1), np.full(3, 0.1)]
    totals = [a + b for a, b in zip(speed, alive, strict=True)]
    ids = np.array([0, 0])
    both = AdvantageInputs.from_trajectories(totals, gamma=0.9, group_ids=ids, reward_streams=[(speed, 0.97), (alive, 0.999)])
    alone = AdvantageInputs.from_trajectories(speed, gamma=0.97, group_ids=ids)
    np.testing.assert_allclose(
        adv("group_step_baseline", both, stream_scale="each").advantages,
        adv("group_step_baseline", alone).advantages,
        atol=1e-12,
    )


def test_group_step_baseline_stream_scale_refusals():
    with pytest.raises(EstimatorError, match=r"stream_scale must be 'joint' or 'each', got 'sum'"):
        get_advantage_estimator("group_step_baseline", stream_scale="sum")
    with pytest.raises(EstimatorError, match=r"stream_scale='each' needs lam=1, got lam=0\.9"):
        get_advantage_estimator("group_step_baseline", stream_scale="each", lam=0.9)
    estimator = get_advantage_estimator("group_step_baseline", stream_scale="each")
    assert estimator.scales_reward_streams and not get_advantage_estimator("group_step_baseline").scales_reward_streams
    assert get_advantage_estimator("group_auto", step_kwargs={"stream_scale": "each"}).scales_reward_streams
    steps = [np.array([1.0, 2.0]), np.array([0.5])]
    single = AdvantageInputs.from_trajectories(steps, gamma=0.9, group_ids=np.array([0, 0]))
    with pytest.raises(EstimatorError, match="needs one discount per reward function"):
        estimator.compute(single)


def test_group_step_baseline_reward_history_by_hand():
    # gamma 0, so G_t = r_t. a = [1, 3, 3], b = [1, 1, 1]: leave-one-out a = [0, 2, 2], b = [0, -2, -2].
    # Features at t = 2 (a minus b): last reward 3 - 1 = 2, moving average .39 - .19 = .2; at t = 1 both 0. The fit
    # explains t = 2 exactly (what a's reward at t = 1 already said) and cannot touch t = 1.
    inputs = group_inputs(
        outcomes=[0.0, 0.0], groups=np.array([0, 0]), step_rewards=[np.array([1.0, 3.0, 3.0]), np.ones(3)], gamma=0.0
    )
    plain = adv("group_step_baseline", inputs, scale="none")
    np.testing.assert_allclose(plain.advantages, [[0.0, 0.0], [2.0, -2.0], [2.0, -2.0]])
    out = adv("group_step_baseline", inputs, scale="none", reward_history=True)
    np.testing.assert_allclose(out.advantages, [[0.0, 0.0], [2.0, -2.0], [0.0, 0.0]], atol=1e-12)


def test_group_step_baseline_reward_history_removes_what_the_state_carries():
    """r_t = s_t + a_t with s a random walk no action moves: the fit on earlier rewards removes much of s_t's share of
    the advantage, so the advantages track the actions better (and their mean over the batch stays zero)."""
    rng = np.random.default_rng(0)
    n_groups, size, horizon = 16, 8, 60
    actions = rng.normal(size=(horizon, n_groups * size))
    state = np.cumsum(rng.normal(scale=0.5, size=(horizon, n_groups * size)), axis=0)
    state -= state[0]  # every member starts from the group's state
    rewards = state + actions
    inputs = AdvantageInputs.from_trajectories(list(rewards.T), gamma=0.0, group_ids=np.repeat(np.arange(n_groups), size))
    plain = adv("group_step_baseline", inputs, scale="none").advantages[1:].ravel()
    history = adv("group_step_baseline", inputs, scale="none", reward_history=True).advantages[1:].ravel()
    signal = (actions - actions.reshape(horizon, n_groups, size).mean(-1).repeat(size, axis=1))[1:].ravel()
    assert np.corrcoef(history, signal)[0, 1] > np.corrcoef(plain, signal)[0, 1] + 0.3
    assert history.var() < 0.4 * plain.var()
    assert abs(history.mean()) < 1e-9


def test_group_step_baseline_reward_history_refusals():
    with pytest.raises(EstimatorError, match=r"reward_history must be True or False, got 'yes'"):
        get_advantage_estimator("group_step_baseline", reward_history="yes")


def state_batch(seed=0, n_groups=4, size=8, horizon=60, action_scale=1.0, gamma=0.0):
    """r_t = 2 s_t + a_t (discounted by ``gamma``, default 0), with the observed state s a random walk no action moves
    (zero at the start, which the group shares) and a the action's own effect; also the action's effect relative to
    the group at each step."""
    rng = np.random.default_rng(seed)
    columns = n_groups * size
    actions = rng.normal(scale=action_scale, size=(horizon, columns))
    state = np.cumsum(rng.normal(scale=0.5, size=(horizon, columns)), axis=0)
    state -= state[0]
    observations = [np.stack([state[:, c], rng.normal(size=horizon)], axis=1) for c in range(columns)]  # + a noise input
    inputs = AdvantageInputs.from_trajectories(
        list((2.0 * state + actions).T), gamma=gamma, group_ids=np.repeat(np.arange(n_groups), size), observations=observations
    )
    signal = actions - actions.reshape(horizon, n_groups, size).mean(-1).repeat(size, axis=1)
    return inputs, signal


def test_group_step_baseline_state_baseline_removes_the_state_and_keeps_the_actions():
    """The state's part of the advantage goes (the advantages follow the actions' own effect, their variance falls by
    more than half) and the batch's mean stays zero; the fraction removed is what ``state_explained`` says."""
    inputs, signal = state_batch()
    plain = adv("group_step_baseline", inputs, scale="none").advantages[1:].ravel()
    estimator = get_advantage_estimator("group_step_baseline", scale="none", state_baseline=True)
    assert estimator.state_explained is None and "observations" in estimator.requires
    state = run_estimator(estimator, inputs).advantages[1:].ravel()
    assert np.corrcoef(plain, signal[1:].ravel())[0, 1] < 0.5
    assert np.corrcoef(state, signal[1:].ravel())[0, 1] > 0.9
    assert state.var() < 0.5 * plain.var()
    whole = adv("group_step_baseline", inputs, scale="none").advantages
    removed = 1.0 - np.square(run_estimator(estimator, inputs).advantages).sum() / np.square(whole).sum()
    assert estimator.state_explained == pytest.approx(removed)
    assert abs(state.mean()) < 0.05 * state.std()
    assert get_advantage_estimator("group_step_baseline").requires == frozenset({"step_rewards", "group_ids"})


def test_group_step_baseline_state_baseline_fits_each_trajectory_on_the_others(monkeypatch):
    """With one ridge penalty the fit subtracted from a trajectory is made on the other folds' trajectories alone:
    with its own advantages changed, the amount subtracted from it is the same, and every other fold's changes."""
    from sb3_grpo.default_plugins import advantage_estimators

    monkeypatch.setattr(advantage_estimators, "STATE_RIDGES", (1e-2,))
    inputs, _ = state_batch(seed=1)
    advantages = adv("group_step_baseline", inputs, scale="none").advantages
    used = inputs.valid
    features = advantage_estimators._state_features(inputs.observations, used, used, *group_index(inputs.group_ids)[:2])
    out, _ = advantage_estimators._subtract_cross_fit(advantages, features, used)
    changed = advantages.copy()
    changed[:, 0] += np.linspace(0.0, 5.0, len(changed))
    out2, _ = advantage_estimators._subtract_cross_fit(changed, features, used)
    fold0 = np.arange(inputs.shape[1]) % advantage_estimators.STATE_FOLDS == 0
    np.testing.assert_allclose((changed - out2)[:, fold0], (advantages - out)[:, fold0], atol=1e-9)
    assert not np.allclose((changed - out2)[:, ~fold0], (advantages - out)[:, ~fold0])


def test_group_step_baseline_state_baseline_subtracts_nothing_that_does_not_predict():
    """Observations whose relation to the returns differs between trajectories (the state's sign flipped on two folds
    of four): every held-out fit leaves more than it found, so the advantages stay as they are (``state_explained``
    0)."""
    inputs, _ = state_batch(seed=2)
    flip = np.where(np.arange(inputs.shape[1]) % 4 < 2, 1.0, -1.0)
    inputs.observations = inputs.observations[:, :, :1] * flip[None, :, None]
    estimator = get_advantage_estimator("group_step_baseline", scale="none", state_baseline=True)
    np.testing.assert_array_equal(
        run_estimator(estimator, inputs).advantages, adv("group_step_baseline", inputs, scale="none").advantages
    )
    assert estimator.state_explained == 0.0


def test_group_step_baseline_state_baseline_with_reward_history_is_one_fit():
    """Both options: the history's features join the state's in the one cross-fitted regression (reported as
    ``state_explained``; ``history_explained`` stays unset)."""
    inputs, signal = state_batch(seed=4)
    estimator = get_advantage_estimator("group_step_baseline", scale="none", state_baseline=True, reward_history=True)
    both = run_estimator(estimator, inputs).advantages[1:].ravel()
    assert estimator.history_explained is None and 0.5 < estimator.state_explained < 1.0
    assert np.corrcoef(both, signal[1:].ravel())[0, 1] > 0.9


@pytest.mark.parametrize("options", [{"state_baseline": True}, {"reward_history": True}])
def test_group_step_baseline_lam_sums_the_deltas_of_the_fitted_value(options):
    """With ``lam < 1`` and a fit, the value of member i at t is the others' mean return-to-go plus the fit,
    ``V = b + F = G - A(lam=1)``, and the advantage the GAE-style sum of ``r_t + gamma V_{t+1} - V_t``, by hand."""
    inputs, _ = state_batch(seed=2, gamma=0.9, horizon=20)
    gamma, lam = 0.9, 0.7
    rewards = np.where(inputs.valid, inputs.rewards, 0.0)
    horizon = rewards.shape[0]
    returns = np.zeros_like(rewards)
    for t in reversed(range(horizon)):
        returns[t] = rewards[t] + (gamma * returns[t + 1] if t + 1 < horizon else 0.0)
    fitted = adv("group_step_baseline", inputs, scale="none", **options).advantages  # G - b - F
    value = returns - fitted
    expected = np.zeros_like(rewards)
    for t in reversed(range(horizon)):
        following = value[t + 1] if t + 1 < horizon else 0.0
        delta = rewards[t] + gamma * following - value[t]
        expected[t] = delta + (gamma * lam * expected[t + 1] if t + 1 < horizon else 0.0)
    got = adv("group_step_baseline", inputs, scale="none", lam=lam, **options).advantages
    np.testing.assert_allclose(got, expected, atol=1e-9)
    # and it is not the plain per-step baseline's sum
    assert not np.allclose(got, adv("group_step_baseline", inputs, scale="none", lam=lam).advantages, atol=1e-3)


def test_group_step_baseline_state_baseline_refusals():
    with pytest.raises(EstimatorError, match=r"state_baseline must be True or False, got 1"):
        get_advantage_estimator("group_step_baseline", state_baseline=1)
    inputs, _ = state_batch()
    inputs.observations = None
    with pytest.raises(EstimatorError, match=r"needs \['observations'\] but the inputs do not carry them"):
        adv("group_step_baseline", inputs, state_baseline=True)
    with pytest.raises(EstimatorError, match="state_baseline=True needs the inputs' observations"):
        get_advantage_estimator("group_step_baseline", state_baseline=True).compute(inputs)
    estimator = get_advantage_estimator("group_step_baseline", state_baseline=True)
    with pytest.raises(EstimatorError, match="observations"):
        check_estimator_needs(estimator, frozenset({"step_rewards", "group_ids"}), "Algo", "")
    with pytest.raises(EstimatorError, match=r"observations must have shape \(2, 1, 'D'\)"):
        AdvantageInputs(rewards=np.zeros((2, 1)), episode_starts=np.zeros((2, 1)), gamma=0.9, observations=np.zeros((2, 1)))


def test_reinforce_baseline_running_mean():
    est = get_advantage_estimator("reinforce_baseline", decay=0.9)
    first = group_inputs(outcomes=[1.0, 3.0], groups=np.array([0, 1]))
    np.testing.assert_allclose(per_trajectory(run_estimator(est, first), first), [-1.0, 1.0])  # baseline = batch mean 2
    second = group_inputs(outcomes=[4.0, 6.0], groups=np.array([0, 1]))
    np.testing.assert_allclose(per_trajectory(run_estimator(est, second), second), [2.0, 4.0])  # baseline 2 (past)
    assert est.baseline == pytest.approx(0.9 * 2 + 0.1 * 5)


outcome_lists = st.lists(st.floats(-100, 100, allow_nan=False), min_size=2, max_size=6)


@settings(max_examples=60, deadline=None)
@given(groups=st.lists(outcome_lists, min_size=1, max_size=4), a=st.floats(0.1, 10), b=st.floats(-50, 50))
def test_group_estimator_invariances(groups, a, b):
    # eps (1e-9) is negligible unless a group's spread is tiny; such groups are flat or well spread here
    assume(all(np.ptp(g) == 0 or np.std(g) * min(a, 1) > 1e-3 for g in groups))
    outcomes = np.concatenate([np.array(g) for g in groups])
    ids = np.concatenate([np.full(len(g), i) for i, g in enumerate(groups)])
    base = group_inputs(outcomes=outcomes, groups=ids)
    moved = group_inputs(outcomes=a * outcomes + b, groups=ids)
    z = get_advantage_estimator("group_zscore", eps=1e-9)
    za, zb = per_trajectory(run_estimator(z, base), base), per_trajectory(run_estimator(z, moved), moved)
    assert np.all(np.isfinite(za))
    # z-score is unchanged by a positive affine transform of the rewards (where the group is not flat)
    np.testing.assert_allclose(za, zb, atol=1e-4 * (1 + np.abs(za).max()))
    # group_mean is shift-invariant and scales linearly
    m0 = per_trajectory(adv("group_mean", base), base)
    np.testing.assert_allclose(per_trajectory(adv("group_mean", moved), moved), a * m0, atol=1e-6 * (1 + abs(a * m0).max()))
    # leave-one-out = G/(G-1) * (R - mean) for each group of size G
    sizes = np.array([len(groups[i]) for i in ids], dtype=float)
    np.testing.assert_allclose(
        per_trajectory(adv("leave_one_out", base), base), sizes / (sizes - 1) * m0, atol=1e-6 * (1 + abs(m0).max())
    )
    # every group's advantages sum to zero for the mean baseline
    for i in range(len(groups)):
        assert abs(m0[ids == i].sum()) < 1e-6 * (1 + np.abs(outcomes).max())


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_groups=st.integers(1, 4), size=st.integers(2, 5))
def test_step_estimators_finite_and_permutation_equivariant(seed, n_groups, size):
    rng, steps, ids, inputs = random_step_batch(seed, n_groups, size)
    perm = rng.permutation(len(steps))
    permuted = AdvantageInputs.from_trajectories([steps[i] for i in perm], gamma=0.95, group_ids=ids[perm])
    for name in ("group_process", "group_step_baseline", "group_zscore"):
        out = adv(name, inputs).advantages
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(adv(name, permuted).advantages, out[:, perm], atol=1e-9)


# -------------------------------------------------------------------------
# The interface: needs, bad outputs
# -------------------------------------------------------------------------


def test_needs_are_checked_naming_estimator_and_algorithm():
    with pytest.raises(EstimatorError, match=r"'gae' needs a critic's value estimates.*GRPO does not provide"):
        check_estimator_needs(get_advantage_estimator("gae"), {"outcome_rewards", "group_ids", "step_rewards"}, "GRPO")
    with pytest.raises(EstimatorError, match=r"'group_zscore' needs group ids.*AdaptiveKLPPO"):
        check_estimator_needs(get_advantage_estimator("group_zscore"), {"values", "step_rewards"}, "AdaptiveKLPPO")


class _Broken:
    requires = frozenset({"outcome_rewards"})

    def __init__(self, result):
        self.result = result

    def compute(self, inputs):
        return self.result


def test_bad_estimator_outputs_are_named():
    inputs = group_inputs()
    with pytest.raises(EstimatorError, match=r"_Broken.*shape"):
        run_estimator(_Broken(AdvantageOutputs(advantages=np.zeros(3))), inputs)
    nan = np.zeros(inputs.shape)
    nan[0, 1] = np.nan
    with pytest.raises(EstimatorError, match=r"_Broken.*non-finite advantage"):
        run_estimator(_Broken(AdvantageOutputs(advantages=nan)), inputs)
    with pytest.raises(EstimatorError, match="must return AdvantageOutputs"):
        run_estimator(_Broken("nope"), inputs)


def test_bad_estimator_options():
    with pytest.raises(EstimatorError, match="scale must be one of"):
        get_advantage_estimator("group_zscore", scale="galaxy")
    with pytest.raises(EstimatorError, match="n must be a positive integer"):
        get_advantage_estimator("n_step", n=0)
    with pytest.raises(TypeError, match="accepts: n"):
        get_advantage_estimator("n_step", lam=3)


def test_group_auto_is_group_zscore_on_outcome_only_rewards():
    # rewards on the last step only (lengths differ): outcome supervision, group_zscore exactly
    inputs = group_inputs(lengths=[1, 3, 2, 2, 4])
    auto = get_advantage_estimator("group_auto")
    assert auto.outcome_only(inputs)
    np.testing.assert_array_equal(run_estimator(auto, inputs).advantages, adv("group_zscore", inputs).advantages)
    assert auto.last_mode == "outcome"


def test_group_auto_is_group_step_baseline_on_per_step_rewards():
    # one nonzero reward before a trajectory's last step is enough: process supervision, group_step_baseline exactly
    step_rewards = [np.array([0.0, 1.0]), np.array([0.5, 0.0, 2.0]), np.array([0.0, 3.0]), np.array([1.0]), np.array([2.0])]
    inputs = group_inputs(step_rewards=step_rewards)
    auto = get_advantage_estimator("group_auto", step_kwargs=dict(scale="none"))
    assert not auto.outcome_only(inputs)
    expected = adv("group_step_baseline", inputs, scale="none").advantages
    np.testing.assert_array_equal(run_estimator(auto, inputs).advantages, expected)
    assert auto.last_mode == "step"
    # by hand, group 0 = trajectories 0, 1, 2 (gamma 0.9): G_0 = (0.9, 0.5 + 1.62, 2.7), at t = 0 trajectory 1 gets
    # 2.12 - (0.9 + 2.7) / 2 = 0.32
    assert np.isclose(expected[0, 1], 0.32)


def test_group_auto_passes_each_half_its_options():
    auto = get_advantage_estimator("group_auto", outcome_kwargs=dict(scale="none"), step_kwargs=dict(lam=0.9))
    inputs = group_inputs()
    np.testing.assert_allclose(per_trajectory(run_estimator(auto, inputs), inputs), [-2, 0, 2, 0, 0])  # R_i - mean_g
    assert auto._step.lam == 0.9 and not auto.accepts_reward_streams  # reward_gammas need lam=1, as group_step_baseline
    with pytest.raises(EstimatorError, match="lam must be in"):
        get_advantage_estimator("group_auto", step_kwargs=dict(lam=2.0))
