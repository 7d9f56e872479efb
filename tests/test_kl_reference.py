"""The KL to the reference policy beyond a fixed loss term: the penalty in the reward (``kl_in_reward``), the adaptive
``beta`` (``kl_target``, ``kl_horizon``) and the moving reference (``ref_mixup_alpha``), each against numbers by hand.
"""

import math
import warnings

import numpy as np
import pytest
import torch as th
from tiny_models import make_model, tiny_env

import sb3_grpo.grpo.grpo as grpo_module
from sb3_grpo import GRPO
from sb3_grpo.common.groups.trajectories import ScoredRollout
from sb3_grpo.common.kl_control import adapt_kl_coef, penalize_rewards

# ---------------------------------------------------------------- the penalty in the reward, by hand

#: two trajectories of 2 and 3 steps: behaviour and reference log-probabilities
OLD = np.array([-1.0, -0.5, -2.0, -1.0, -0.2])
REF = np.array([-1.2, -0.5, -1.0, -1.5, -0.2])


def _scored(step_rewards):
    step_rewards = [np.asarray(r, dtype=np.float64) for r in step_rewards]
    counts = np.array([len(r) for r in step_rewards])
    steps = int(counts.sum())
    return ScoredRollout(
        observations=np.zeros((steps, 1), dtype=np.float32),
        actions=np.zeros(steps),
        log_prob=OLD.astype(np.float32),
        counts=counts,
        group_ids=np.zeros(len(counts), dtype=np.int64),
        trajectories=[],
        outcomes=np.array([r.sum() for r in step_rewards]),
        step_rewards=[np.asarray(r, dtype=np.float64) for r in step_rewards],
        streams=[[np.asarray(r, dtype=np.float64) for r in step_rewards]],
        n_env_steps=steps,
        n_groups=1,
    )


def test_a_scored_rollout_splits_its_flat_steps_per_trajectory():
    scored = _scored([[1.0, 1.0], [0.0, 1.0, 1.0]])
    assert scored.starts.tolist() == [0, 2]
    assert [steps.tolist() for steps in scored.per_trajectory(np.arange(5))] == [[0, 1], [2, 3, 4]]
    none = _scored([])
    assert none.starts.tolist() == [] and none.per_trajectory(np.zeros(0)) == []


def test_the_penalty_comes_off_each_step_where_rewards_come_at_every_step():
    scored = _scored([[1.0, 1.0], [0.0, 1.0, 1.0]])
    # k1 = log pi_old - log pi_ref = [0.2, 0, -1, 0.5, 0]; beta = 0.5
    penalized, measured = penalize_rewards(scored, REF.astype(np.float32), 0.5, "k1")
    np.testing.assert_allclose(penalized.step_rewards[0], [0.9, 1.0], rtol=1e-6)
    np.testing.assert_allclose(penalized.step_rewards[1], [0.5, 0.75, 1.0], rtol=1e-6)
    np.testing.assert_allclose(penalized.outcomes, [1.9, 2.25], rtol=1e-6)
    assert len(penalized.streams) == 2  # the reward function's and the penalty's
    np.testing.assert_allclose(penalized.streams[1][1], [0.5, -0.25, 0.0], rtol=1e-6, atol=1e-7)
    assert measured == pytest.approx(np.mean([0.1, -0.5 / 3]), rel=1e-6)  # mean over trajectories of their mean
    np.testing.assert_array_equal(scored.step_rewards[0], [1.0, 1.0])  # the rollout given is left as it was


def test_the_summed_penalty_comes_off_the_outcome_where_only_last_steps_are_rewarded():
    scored = _scored([[0.0, 1.0], [0.0, 0.0, 2.0]])
    penalized, measured = penalize_rewards(scored, REF.astype(np.float32), 0.5, "k3")
    k3 = [math.exp(r - o) - 1 - (r - o) for o, r in zip(OLD, REF, strict=True)]  # exp(l) - 1 - l, l = log ref - log old
    first, second = 0.5 * (k3[0] + k3[1]), 0.5 * (k3[2] + k3[3] + k3[4])
    np.testing.assert_allclose(penalized.step_rewards[0], [0.0, 1.0 - first], rtol=1e-6)
    np.testing.assert_allclose(penalized.step_rewards[1], [0.0, 0.0, 2.0 - second], rtol=1e-6)
    np.testing.assert_allclose(penalized.outcomes, [1.0 - first, 2.0 - second], rtol=1e-6)
    assert measured == pytest.approx(np.mean([(k3[0] + k3[1]) / 2, (k3[2] + k3[3] + k3[4]) / 3]), rel=1e-6)


def _away_from_the_reference(model):
    with th.no_grad():
        generator = th.Generator().manual_seed(1)
        for p in model.ref_policy.parameters():
            p.add_(0.5 * th.randn(p.shape, generator=generator))


def _kl_in_reward_model(monkeypatch, **kwargs):
    """A GRPO model whose reference differs from the policy, recording the rollout before and after the penalty."""
    model = make_model("grpo", beta=0.5, kl_in_reward=True, **kwargs)
    _away_from_the_reference(model)
    seen = {}
    fill = model._fill_batch
    build = grpo_module.build_batch

    def record_fill(scored, buffer, env):
        seen["scored"] = scored
        return fill(scored, buffer, env)

    def record_build(scored, *args, **kw):
        seen["penalized"] = scored
        return build(scored, *args, **kw)

    model._fill_batch = record_fill
    monkeypatch.setattr(grpo_module, "build_batch", record_build)
    return model, seen


def _k3_by_hand(model, scored):
    with th.no_grad():
        ref = model.ref_policy.evaluate_actions(th.as_tensor(scored.observations), th.as_tensor(scored.actions).reshape(-1))
    log_ratio = ref[0].double().numpy() - scored.log_prob.astype(np.float64)
    return np.split(np.exp(log_ratio) - 1 - log_ratio, np.cumsum(scored.counts)[:-1])


def test_grpo_trains_on_the_penalized_rewards_per_step(monkeypatch):
    model, seen = _kl_in_reward_model(monkeypatch)
    reference = [p.clone() for p in model.ref_policy.parameters()]
    model.learn(1)
    scored, penalized = seen["scored"], seen["penalized"]
    kl = _k3_by_hand(model, scored)
    assert all(th.equal(a, b) for a, b in zip(model.ref_policy.parameters(), reference, strict=True))
    for i, steps in enumerate(kl):  # TargetEnv rewards every step: off each step
        np.testing.assert_allclose(penalized.step_rewards[i], scored.step_rewards[i] - 0.5 * steps, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(penalized.outcomes, scored.outcomes - 0.5 * np.array([k.sum() for k in kl]), rtol=1e-5)
    assert max(float(k.max()) for k in kl) > 1e-2  # the reference is far enough for the penalty to show
    values = model.logger.name_to_value
    assert values["train/kl_ref"] == pytest.approx(np.mean([k.mean() for k in kl]), rel=1e-5)
    assert values["train/beta"] == 0.5


def outcome_only(trajectory):
    return float(trajectory.rewards.sum())


def test_grpo_takes_the_penalty_off_the_outcome_and_group_auto_keeps_the_outcome_estimator(monkeypatch):
    model, seen = _kl_in_reward_model(monkeypatch, reward_functions=[outcome_only])
    model.learn(1)
    scored, penalized = seen["scored"], seen["penalized"]
    kl = _k3_by_hand(model, scored)
    for i, steps in enumerate(kl):
        expected = scored.step_rewards[i].copy()
        expected[-1] -= 0.5 * steps.sum()
        np.testing.assert_allclose(penalized.step_rewards[i], expected, rtol=1e-5, atol=1e-6)
    assert model._estimator.last_mode == "outcome"


def test_the_loss_has_no_kl_term_with_the_penalty_in_the_reward(monkeypatch):
    used = []
    estimate = grpo_module.kl_estimate

    def recording(log_ratio, estimator="k3"):
        used.append(estimator)
        return estimate(log_ratio, estimator)

    monkeypatch.setattr(grpo_module, "kl_estimate", recording)
    make_model("grpo", beta=0.5, kl_estimator="k2", n_epochs=2).learn(1)
    assert "k2" in used  # in the loss
    used.clear()
    make_model("grpo", beta=0.5, kl_estimator="k2", n_epochs=2, kl_in_reward=True).learn(1)
    assert used and set(used) == {"k3"}  # only train/approx_kl's estimate: no KL term in the loss


def test_the_penalty_is_one_more_reward_stream_with_reward_gammas():
    model = make_model(
        "grpo", beta=0.5, kl_in_reward=True, reward_functions=["episodic_return"] * 2, reward_gammas=[0.9, 0.99]
    )
    model.learn(40)
    assert np.isfinite(model.logger.name_to_value["train/kl_ref"])


# ---------------------------------------------------------------- the adaptive beta, step by step


def test_the_adaptive_rule_step_by_step():
    # e = clip(kl / 0.02 - 1, -0.2, 0.2): 0.2, -0.2, 0.05, 0.2, -0.2, 0; n / horizon = 50 / 1000
    betas, beta = [], 0.1
    for kl in [0.03, 0.01, 0.021, 0.05, 0.0, 0.02]:
        beta = adapt_kl_coef(beta, kl, 0.02, 50, 1000)
        betas.append(beta)
    expected = [0.101, 0.09999, 0.100239975, 0.10124237475, 0.1002299510025, 0.1002299510025]
    assert betas == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("kl_in_reward", [False, True])
def test_grpo_adapts_beta_after_every_update_by_hand(kl_in_reward):
    target, horizon = 0.002, 20.0
    model = make_model("grpo", beta=0.1, kl_target=target, kl_horizon=horizon, kl_in_reward=kl_in_reward)
    if kl_in_reward:
        _away_from_the_reference(model)
    updates = []
    train = model.train

    def recording_train():
        before = model.beta
        train()
        values = model.logger.name_to_value
        updates.append((before, values["train/beta"], values["train/kl_ref"], model.rollout_buffer.n_trajectories, model.beta))

    model.train = recording_train
    model.learn(200)
    assert len(updates) >= 5
    for k, (before, logged, kl, n, after) in enumerate(updates):
        assert logged == before  # train/beta: the beta this update used
        error = min(max(kl / target - 1.0, -0.2), 0.2)
        assert after == pytest.approx(before * (1.0 + error * n / horizon), rel=1e-12)
        if k:
            assert before == updates[k - 1][4]
    assert len({round(u[4], 12) for u in updates}) > 2  # beta moved


def test_the_adapted_beta_is_saved_with_the_model(tmp_path):
    model = make_model("grpo", beta=0.1, kl_target=0.002, kl_horizon=20.0)
    model.learn(100)
    assert model.beta != 0.1
    model.save(tmp_path / "model.zip")
    loaded = GRPO.load(tmp_path / "model.zip", env=tiny_env(), device="cpu")
    assert loaded.beta == model.beta and loaded.kl_target == 0.002 and loaded.kl_horizon == 20.0
    loaded.learn(40)


def test_a_run_with_the_penalty_in_the_reward_an_adaptive_beta_and_a_moving_reference_resumes_bit_for_bit(tmp_path):
    options = dict(beta=0.1, kl_in_reward=True, kl_target=0.002, kl_horizon=20.0, ref_update_interval=2, ref_mixup_alpha=0.5)
    straight = make_model("grpo", **options)
    straight.learn(60)
    straight.learn(60, reset_num_timesteps=False)
    first = make_model("grpo", **options)
    first.learn(60)
    first.save(tmp_path / "model.zip")
    loaded = GRPO.load(tmp_path / "model.zip", env=tiny_env(), device="cpu")
    loaded.learn(60, reset_num_timesteps=False)
    assert loaded.beta == straight.beta != 0.1
    for a, b in [(loaded.policy, straight.policy), (loaded.ref_policy, straight.ref_policy)]:
        assert all(th.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def test_an_update_that_would_turn_beta_negative_names_the_horizon():
    # a KL far below the target: beta *= 1 - 0.2 * n / 0.5 with n >= 4 trajectories
    model = make_model("grpo", beta=0.1, kl_target=10.0, kl_horizon=0.5)
    with pytest.raises(ValueError, match=r"GRPO: kl_target would move beta .* Raise kl_horizon above"):
        model.learn(40)


# ---------------------------------------------------------------- the moving reference


@pytest.mark.parametrize("name", ["grpo", "online_dpo"])
def test_the_reference_becomes_the_mixture_every_interval(name):
    alpha, interval = 0.25, 2
    model = make_model(name, ref_update_interval=interval, ref_mixup_alpha=alpha, **({"beta": 0.1} if name == "grpo" else {}))
    expected = [p.detach().clone() for p in model.policy.parameters()]  # the reference starts as the initial policy
    policies = []
    train = model.train

    def recording_train():
        done = model._updates_done
        train()
        if model._updates_done > done:  # an update that trained (OnlineDPO skips a rollout without pairs)
            policies.append([p.detach().clone() for p in model.policy.parameters()])

    model.train = recording_train
    model.learn(300)
    assert len(policies) >= 4
    for k, params in enumerate(policies, start=1):
        if k % interval == 0:
            expected = [alpha * p + (1 - alpha) * r for p, r in zip(params, expected, strict=True)]
    gap_to_policy = 0.0
    for got, want, policy in zip(model.ref_policy.parameters(), expected, policies[-1], strict=True):
        th.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)  # float32 rounding of a few mixtures
        gap_to_policy = max(gap_to_policy, float((got - policy).abs().max()))
    assert gap_to_policy > 1e-3  # a mixture, not a copy


@pytest.mark.parametrize("name", ["grpo", "online_dpo"])
def test_alpha_one_copies_the_policy_bit_for_bit(name):
    model = make_model(name, ref_update_interval=1, **({"beta": 0.1} if name == "grpo" else {}))
    model.learn(100)
    assert all(th.equal(r, p) for r, p in zip(model.ref_policy.parameters(), model.policy.parameters(), strict=True))


# ---------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("grpo", dict(kl_target=0.01), r"kl_target adapts beta by a factor per update, which cannot move beta=0.0"),
        ("grpo", dict(beta=0.1, kl_target=0.0), r"kl_target must be a finite number > 0 .* got 0.0"),
        ("grpo", dict(kl_horizon=-1), r"kl_horizon must be a finite number > 0 .* got -1"),
        ("grpo", dict(kl_horizon="100"), r"kl_horizon must be a number, got '100'"),
        ("grpo", dict(kl_in_reward=1), r"kl_in_reward must be True .* or False .*, got 1"),
        ("grpo", dict(ref_mixup_alpha=0.0), r"ref_mixup_alpha must be a number in \(0, 1\] .* got 0.0"),
        ("online_dpo", dict(ref_mixup_alpha=1.5), r"OnlineDPO: ref_mixup_alpha must be a number in \(0, 1\]"),
        ("online_dpo", dict(ref_mixup_alpha="0.5"), r"ref_mixup_alpha must be a number, got '0.5'"),
    ],
)
def test_bad_arguments_are_refused(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_model(name, **kwargs)


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("grpo", dict(ref_mixup_alpha=0.5), r"GRPO: ref_mixup_alpha=0.5 has no effect"),
        ("grpo", dict(ref_mixup_alpha=0.5, ref_update_interval=2), r"GRPO: ref_mixup_alpha=0.5 has no effect"),  # beta=0
        ("online_dpo", dict(ref_mixup_alpha=0.5), r"OnlineDPO: ref_mixup_alpha=0.5 has no effect"),
    ],
)
def test_a_mixup_without_a_moving_reference_warns(name, kwargs, match):
    with pytest.warns(UserWarning, match=match):
        make_model(name, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_model(name, **{**kwargs, "ref_update_interval": 2, **({"beta": 0.1} if name == "grpo" else {})})
