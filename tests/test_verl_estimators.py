"""Oracle tests for the estimators of verl's registry (sb3_grpo/default_plugins/verl_estimators.py), the score norms
GRPO hands them, and how ``scale`` of the group estimators compares with TRL's ``scale_rewards``.

The hand batch (gamma 0.5), per-step rewards and outcomes (their sums):

- group 0, unequal lengths and a tie: a = [1, 0, 1] (2), b = [2] (2), c = [0, 5] (5);
- group 1, all outcomes equal: d = [1, 1] (2), e = [2, 0] (2);
- group 2, a group of one: f = [3] (3).
"""

import gymnasium as gym
import numpy as np
import pytest
import torch as th

from sb3_grpo import GRPO, REINFORCE, AdaptiveKLPPO, AdvantageInputs, get_advantage_estimator
from sb3_grpo.common.advantages import EstimatorError, run_estimator
from sb3_grpo.default_plugins.verl_estimators import VERL_ESTIMATORS, whiten
from sb3_grpo.grpo.batch import score_norms

STEPS = [[1.0, 0.0, 1.0], [2.0], [0.0, 5.0], [1.0, 1.0], [2.0, 0.0], [3.0]]
GROUPS = np.array([0, 0, 0, 1, 1, 2])
#: per-step squared score norms (as a categorical policy would give them), for optimal_token_baseline
NORMS = [[0.5, 0.25, 1.0], [1.0], [0.5, 0.5], [0.5, 0.5], [1.0, 0.5], [0.5]]


def hand_batch(columns=range(6), gamma=0.5):
    columns = list(columns)
    return AdvantageInputs.from_trajectories(
        [np.array(STEPS[i]) for i in columns],
        gamma=gamma,
        group_ids=GROUPS[columns],
        score_norms=[np.array(NORMS[i]) for i in columns],
    )


def adv(name, inputs, **kwargs):
    return run_estimator(get_advantage_estimator(name, **kwargs), inputs).advantages


def steps_of(advantages, inputs):
    """The advantages of the real steps, trajectory by trajectory (and zero on padding)."""
    assert np.all(advantages[~inputs.valid] == 0.0)
    return np.concatenate([advantages[:n, i] for i, n in enumerate(inputs.lengths)])


def verl_whiten(x):
    """verl's masked_whiten on the real steps: the mean and the sample variance, 1e-8 under the square root."""
    x = np.asarray(x, dtype=np.float64)
    return (x - x.mean()) / np.sqrt(x.var(ddof=1) + 1e-8)


def test_reinforce_plus_plus_by_hand():
    inputs = hand_batch()
    # discounted (0.5) rewards-to-go: a = [1 + .5 * (0 + .5 * 1), 0 + .5 * 1, 1], b = [2], c = [.5 * 5, 5], d = [1.5, 1],
    # e = [2, 0], f = [3]
    returns = [1.25, 0.5, 1.0, 2.0, 2.5, 5.0, 1.5, 1.0, 2.0, 0.0, 3.0]
    np.testing.assert_allclose(steps_of(adv("reinforce_plus_plus", inputs), inputs), verl_whiten(returns), rtol=1e-12)
    # over the whole batch, not per group: the mean of every step's advantage is zero
    assert abs(steps_of(adv("reinforce_plus_plus", inputs), inputs).mean()) < 1e-12


def test_reinforce_plus_plus_baseline_by_hand():
    inputs = hand_batch()
    # group 0: mean 3 -> a -1, b -1, c 2; group 1: flat -> 0; group 2 (one member): its outcome 3, as verl (baseline 0)
    centred = [-1.0, -1.0, -1.0, -1.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0]  # on every step of each episode
    out = steps_of(adv("reinforce_plus_plus_baseline", inputs), inputs)
    np.testing.assert_allclose(out, verl_whiten(centred), rtol=1e-12)
    # the whitening shifts the flat group too: -mean / std, not zero (as verl)
    assert out[6] == pytest.approx(-(3 / 11) / np.std(centred, ddof=1), rel=1e-6) and out[6] < 0


def test_whiten_gives_exact_zeros_without_spread():
    valid = np.array([[True, True], [True, False]])
    np.testing.assert_array_equal(whiten(np.full((2, 2), 0.1), valid), np.zeros((2, 2)))
    np.testing.assert_array_equal(whiten(np.array([[3.0]]), np.array([[True]])), np.zeros((1, 1)))  # one step
    flat = hand_batch(columns=[3, 4])  # outcomes 2 and 2: every centred value 0
    assert np.all(adv("reinforce_plus_plus_baseline", flat) == 0.0)


def test_grpo_passk_by_hand():
    inputs = hand_batch(columns=range(5))  # without the group of one
    # group 0: outcomes (2, 2, 5): only c learns, 5 - 2 = 3, over the sample std of (2, 2, 5) = sqrt(3);
    # group 1: (2, 2), a tie for the best: zero
    out = steps_of(adv("grpo_passk", inputs), inputs)
    np.testing.assert_allclose(out, [0, 0, 0, 0, 3 / (np.sqrt(3) + 1e-6), 3 / (np.sqrt(3) + 1e-6), 0, 0, 0, 0], rtol=1e-12)
    out = steps_of(adv("grpo_passk", inputs, scale="none"), inputs)
    np.testing.assert_allclose(out, [0, 0, 0, 0, 3, 3, 0, 0, 0, 0])
    # a tie for the best gives zero to the whole group, whatever the others scored
    tied = AdvantageInputs.from_trajectories([np.array([4.0]), np.array([1.0]), np.array([4.0])], 0.9, group_ids=[0, 0, 0])
    assert np.all(adv("grpo_passk", tied) == 0.0)


def test_grpo_passk_refuses_a_group_of_one_and_bad_options():
    with pytest.raises(EstimatorError, match=r"at least 2 members per group .* group 2 has 1\. Use group_size >= 2"):
        adv("grpo_passk", hand_batch())
    with pytest.raises(EstimatorError, match=r"scale must be 'group' or 'none', got 'batch'"):
        get_advantage_estimator("grpo_passk", scale="batch")
    with pytest.raises(EstimatorError, match="eps must be positive"):
        get_advantage_estimator("grpo_passk", eps=0.0)


def test_optimal_token_baseline_by_hand():
    inputs = hand_batch()
    # undiscounted rewards-to-go G: a = [2, 1, 1], b = [2], c = [5, 5], d = [2, 1], e = [2, 0], f = [3];
    # accumulated norms W: a = [.5, .75, 1.75], b = [1], c = [.5, 1], d = [.5, 1], e = [1, 1.5], f = [.5].
    # group 0, t=0: B = (2 * .5 + 2 * 1 + 5 * .5) / 2 = 2.75; t=1 (a, c): B = (1 * .75 + 5 * 1) / 1.75 = 23/7;
    # t=2: a runs alone: zero. group 1, t=0: G equal (2, 2): zero; t=1: B = (1 * 1 + 0 * 1.5) / 2.5 = .4.
    # group 2, one member: baseline 0, its G.
    expected = [-0.75, 1 - 23 / 7, 0.0, -0.75, 2.25, 5 - 23 / 7, 0.0, 0.6, 0.0, -0.4, 3.0]
    np.testing.assert_allclose(steps_of(adv("optimal_token_baseline", inputs), inputs), expected, rtol=1e-7)
    # handle_zero_tail: a, alone past c's end (step 2), keeps its G = 1; group 1's members end together
    expected[2] = 1.0
    zero_tail = adv("optimal_token_baseline", inputs, handle_zero_tail=True)
    np.testing.assert_allclose(steps_of(zero_tail, inputs), expected, rtol=1e-7)
    # discounted (0.5): group 1, t=0: G d = 1.5, e = 2; B = (1.5 * .5 + 2 * 1) / 1.5
    discounted = adv("optimal_token_baseline", inputs, discounted=True)
    baseline = (1.5 * 0.5 + 2.0) / 1.5
    np.testing.assert_allclose(discounted[0, 3:5], [1.5 - baseline, 2.0 - baseline], rtol=1e-7)


def test_optimal_token_baseline_is_a_weighted_group_mean():
    """With equal norms on every step of every member, B_t is the plain mean of G_t over the members running at t."""
    rng = np.random.default_rng(0)
    steps = [rng.normal(size=n) for n in (4, 4, 4, 3, 3)]
    ids = np.array([0, 0, 0, 1, 1])
    inputs = AdvantageInputs.from_trajectories(steps, 0.9, group_ids=ids, score_norms=[np.ones(len(s)) for s in steps])
    out = adv("optimal_token_baseline", inputs, eps=1e-12)
    returns = [np.cumsum(s[::-1])[::-1] for s in steps]
    for i, g in enumerate(returns):
        others = [returns[j] for j in np.flatnonzero(ids == ids[i])]
        np.testing.assert_allclose(out[: len(g), i], g - np.mean(others, axis=0), atol=1e-9)


def test_verl_estimators_need_what_they_read():
    """reinforce_plus_plus needs whole episodes: REINFORCE fits, a critic algorithm's cut episodes do not; the score
    norms exist for a categorical policy only."""
    with pytest.raises(EstimatorError, match=r"'reinforce_plus_plus' needs one outcome reward per trajectory"):
        AdaptiveKLPPO("MlpPolicy", "CartPole-v1", advantage_estimator="reinforce_plus_plus", device="cpu")
    assert REINFORCE("MlpPolicy", "CartPole-v1", baseline="reinforce_plus_plus", device="cpu")._estimator is not None
    with pytest.raises(EstimatorError, match=r"'optimal_token_baseline' needs .*categorical policy.*GRPO does not provide"):
        GRPO("MlpPolicy", "Pendulum-v1", advantage_estimator="optimal_token_baseline", device="cpu")
    with pytest.raises(EstimatorError, match=r"needs \['score_norms'\] but the inputs do not carry them"):
        run_estimator(get_advantage_estimator("optimal_token_baseline"), AdvantageInputs.from_trajectories(
            [np.ones(2)], 0.9, group_ids=[0]
        ))  # fmt: skip


def test_score_norms_are_the_squared_gradient_of_the_log_probability_in_the_logits():
    model = GRPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu")
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    actions = np.array([0, 1, 1, 0, 1])
    expected = []
    for o, a in zip(obs, actions, strict=True):
        with th.no_grad():
            logits = model.policy.action_net(model.policy._latent(th.as_tensor(o[None])))
        logits.requires_grad_(True)
        (grad,) = th.autograd.grad(th.log_softmax(logits, dim=-1)[0, a], logits)
        expected.append(float((grad**2).sum()))
    np.testing.assert_allclose(score_norms(model.policy, obs, actions, chunk=2), expected, rtol=1e-6)


def test_trl_scale_rewards_against_ours():
    """TRL's scale_rewards divides by the sample std (Bessel): of the group for "group", of the raw rewards over the
    batch for "batch". Ours: the group's population std, and the population std of the centred rewards. "none" is
    the same."""
    outcomes = np.array([1.0, 3.0, 5.0, 2.0, 2.0])
    inputs = AdvantageInputs.from_trajectories(
        [np.array([r]) for r in outcomes], 0.9, outcome_rewards=outcomes, group_ids=[0, 0, 0, 1, 1]
    )
    centred = np.array([-2.0, 0.0, 2.0, 0.0, 0.0])
    ours = {scale: adv("group_zscore", inputs, scale=scale)[0] for scale in ("group", "batch", "none")}
    np.testing.assert_array_equal(ours["none"], centred)  # TRL's "none": rewards - mean_grouped_rewards
    # group: population std of (1, 3, 5) is sqrt(8/3); TRL's sample std is 2
    np.testing.assert_allclose(ours["group"], centred / (np.sqrt(8 / 3) + 1e-4), rtol=1e-12)
    trl_group = centred / (2.0 + 1e-4)
    np.testing.assert_allclose(ours["group"] * (np.sqrt(8 / 3) + 1e-4) / (2.0 + 1e-4), trl_group, rtol=1e-12)
    # batch: the population std of the centred rewards is sqrt(8/5); TRL's, the sample std of the rewards, sqrt(9.2/4)
    np.testing.assert_allclose(ours["batch"], centred / (np.sqrt(8 / 5) + 1e-4), rtol=1e-12)
    trl_batch = centred / (np.sqrt(9.2 / 4) + 1e-4)
    assert np.sqrt(9.2 / 4) == pytest.approx(np.std(outcomes, ddof=1))
    assert np.all(np.abs(trl_batch) <= np.abs(ours["batch"])) and not np.allclose(trl_batch, ours["batch"])


@pytest.mark.parametrize("name", sorted(VERL_ESTIMATORS))
def test_grpo_trains_on_cartpole(name):
    env = gym.make("CartPole-v1")
    model = GRPO(
        "MlpPolicy", env, n_steps=64, group_size=4, batch_size=64, n_epochs=2, advantage_estimator=name,
        policy_kwargs=dict(net_arch=[16]), seed=0, device="cpu",
    )  # fmt: skip
    model.learn(300)
    assert model.num_timesteps >= 300
    assert type(model._estimator) is VERL_ESTIMATORS[name]
    advantages = model.rollout_buffer.advantages
    assert len(advantages) and np.all(np.isfinite(advantages)) and np.any(advantages != 0.0)
