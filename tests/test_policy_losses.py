"""GRPO's policy losses: every built-in's per-step loss and its gradient against closed forms worked out by hand, and
GRPO's loss options (``kl_estimator``, ``top_entropy_quantile``). The registry, third-party losses, save / load and the
bitwise check of the default loss: ``tests/test_policy_loss_plugins.py``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch as th
from tiny_models import make_model, tiny_env

import sb3_grpo
from sb3_grpo import GRPO, PolicyLoss, PolicyLossInputs, PolicyLossOutputs
from sb3_grpo.common.policy_losses import run_policy_loss
from sb3_grpo.default_plugins.policy_losses import BUILTIN_POLICY_LOSSES
from sb3_grpo.grpo.loss import entropy_mask, ratio_statistics

# -------------------------------------------------------------------------
# One small batch, worked out by hand
# -------------------------------------------------------------------------

#: pi_old = 0.5 on every step; pi_theta below, so the ratios are r = (1.5, 0.5, 1.5, 1.1, 0.6, 1.0)
P_NEW = np.array([0.75, 0.25, 0.75, 0.55, 0.3, 0.5])
R = P_NEW / 0.5
A = np.array([1.0, -1.0, -1.0, 1.0, 1.0, -2.0])
W = np.array([0.1, 0.2, 0.15, 0.25, 0.05, 0.25])  # aggregation weights (not uniform: the gradient must carry them)
TRAJECTORY = np.array([0, 0, 1, 1, 1, 2])  # three trajectories of 2, 3 and 1 steps
EPS_LOW, EPS_HIGH = 0.2, 0.3  # the clip range [0.8, 1.3]: steps 0 and 1 lie outside it (1.5 with A > 0, 0.5 with A < 0)


def _run(name, weights=W, eps=(EPS_LOW, EPS_HIGH), **kwargs):
    """``(per_step, d sum(weights * per_step) / d log_prob, outputs)`` of the registered loss ``name``."""
    log_prob = th.tensor(np.log(P_NEW), dtype=th.float64, requires_grad=True)
    weights_t = th.tensor(weights, dtype=th.float64)
    inputs = PolicyLossInputs(
        log_prob=log_prob,
        old_log_prob=th.full((6,), np.log(0.5), dtype=th.float64),
        advantages=th.tensor(A, dtype=th.float64),
        weights=weights_t,
        trajectory=th.tensor(TRAJECTORY),
        n_trajectories=3,
        clip_range_low=eps[0],
        clip_range_high=eps[1],
    )
    outputs = run_policy_loss(sb3_grpo.get_policy_loss(name, **kwargs), inputs)
    (weights_t * outputs.per_step).sum().backward()
    return outputs.per_step.detach().numpy(), log_prob.grad.numpy(), outputs


def _surrogate_oracle(r, advantages, low, high, unclipped_cap=None):
    """``-min(u A, clip(r) A)`` with ``u = min(r, cap)``, and its derivative in ``log pi`` (``dr / dlog pi = r``). Where
    the two terms are equal torch's ``min`` splits the gradient between them."""
    unclipped = r if unclipped_cap is None else np.minimum(r, unclipped_cap)
    d_unclipped = r * (1.0 if unclipped_cap is None else (r < unclipped_cap))
    clipped = np.clip(r, 1 - low, 1 + high)
    d_clipped = r * ((r > 1 - low) & (r < 1 + high))
    t1, t2 = unclipped * advantages, clipped * advantages
    loss = -np.minimum(t1, t2)
    derivative = np.where(t1 < t2, -advantages * d_unclipped, np.where(t2 < t1, -advantages * d_clipped, 0.0))
    tie = t1 == t2
    derivative = np.where(tie, -advantages * (d_unclipped + d_clipped) / 2, derivative)
    return loss, derivative


def test_every_builtin_is_registered_and_has_an_oracle_test():
    assert set(sb3_grpo.available_policy_losses()) >= set(BUILTIN_POLICY_LOSSES)
    tested = {name.removeprefix("test_").split("_by_hand")[0] for name in globals() if name.endswith("_by_hand")}
    assert set(BUILTIN_POLICY_LOSSES) <= tested


def test_clip_by_hand():
    per_step, grad, outputs = _run("clip")
    # -min(r A, clip(r, 0.8, 1.3) A): 1.5 * 1 -> 1.3 (clipped, no gradient); 0.5 * -1 -> min(-0.5, -0.8) = -0.8
    # (clipped); 1.5 * -1 -> -1.5 (the unclipped term is the smaller); 1.1, 0.6 (0.6 < 0.8: unclipped), -2
    np.testing.assert_allclose(per_step, [-1.3, 0.8, 1.5, -1.1, -0.6, 2.0])
    # d(-r A)/dlog pi = -r A where the unclipped term counts, 0 where the clip holds
    np.testing.assert_allclose(grad, W * np.array([0.0, 0.0, 1.5, -1.1, -0.6, 2.0]), atol=1e-15)
    np.testing.assert_allclose(outputs.ratio.detach().numpy(), R)
    assert outputs.stats == {}
    loss, derivative = _surrogate_oracle(R, A, EPS_LOW, EPS_HIGH)
    np.testing.assert_allclose(per_step, loss)
    np.testing.assert_allclose(grad, W * derivative, atol=1e-15)


def test_clip_with_the_dual_clip_and_delta_by_hand():
    # dual clip c = 1.4: where A < 0 the loss is at most -c A. Step 2 (r = 1.5, A = -1): 1.5 -> 1.4, no gradient
    per_step, grad, outputs = _run("clip", clip_ratio_c=1.4)
    np.testing.assert_allclose(per_step, [-1.3, 0.8, 1.4, -1.1, -0.6, 2.0])
    np.testing.assert_allclose(grad, W * np.array([0.0, 0.0, 0.0, -1.1, -0.6, 2.0]), atol=1e-15)
    assert outputs.stats == {"dual_clip_fraction": pytest.approx(1 / 6)}
    # delta = 1.45 caps the unclipped ratio: step 2's -min(1.45 * -1, 1.3 * -1) = 1.45, no gradient
    per_step, grad, outputs = _run("clip", delta=1.45)
    np.testing.assert_allclose(per_step, [-1.3, 0.8, 1.45, -1.1, -0.6, 2.0])
    loss, derivative = _surrogate_oracle(R, A, EPS_LOW, EPS_HIGH, unclipped_cap=1.45)
    np.testing.assert_allclose(per_step, loss)
    np.testing.assert_allclose(grad, W * derivative, atol=1e-15)
    assert outputs.stats == {"delta_clip_fraction": pytest.approx(1 / 6)}
    # both: delta first (1.45), then the dual clip (1.4)
    per_step, _, outputs = _run("clip", clip_ratio_c=1.4, delta=1.45)
    np.testing.assert_allclose(per_step, [-1.3, 0.8, 1.4, -1.1, -0.6, 2.0])


def test_gspo_by_hand():
    # trajectory ratios s_i = exp(mean log r): sqrt(1.5 * 0.5) = 0.866, (1.5 * 1.1 * 0.6)^(1/3) = 0.99666, 1.0
    s = np.array([np.sqrt(0.75), 0.99 ** (1 / 3), 1.0])
    low, high = 0.1, 0.001  # [0.9, 1.001]: s_0 lies below it
    per_step, grad, outputs = _run("gspo", eps=(low, high))
    s_step = s[TRAJECTORY]
    np.testing.assert_allclose(outputs.ratio.detach().numpy(), s_step)
    # step 0 (A = 1): min(0.866, 0.9) = 0.866, unclipped; step 1 (A = -1): min(-0.866, -0.9) = -0.9, clipped
    np.testing.assert_allclose(per_step, [-s[0], 0.9, s[1], -s[1], -s[1], 2.0])
    # d s_i / d log pi_t = s_i / L_i for each step t of trajectory i; each step u of i contributes w_u * (-A_u) where
    # its unclipped term counts (here every step but step 1)
    counts = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    lengths = np.array([2.0, 3.0, 1.0])
    per_trajectory = np.array([np.sum((W * -A * counts)[i == TRAJECTORY]) for i in range(3)])
    np.testing.assert_allclose(grad, (per_trajectory * s / lengths)[TRAJECTORY])
    assert type(sb3_grpo.get_policy_loss("gspo")).by_trajectory is True


def test_cispo_by_hand():
    # the weight sg(min(r, 1 + eps_high)) = (1.3, 0.5, 1.3, 1.1, 0.6, 1.0); loss -w A log pi; gradient -w A
    per_step, grad, outputs = _run("cispo")
    weight = np.minimum(R, 1 + EPS_HIGH)
    np.testing.assert_allclose(per_step, -weight * A * np.log(P_NEW))
    np.testing.assert_allclose(grad, W * -weight * A)
    assert outputs.stats == {"cispo_clip_fraction": pytest.approx(2 / 6)}  # the two ratios of 1.5
    # verl's form clips from below too: 0.5 -> 0.8, 0.6 -> 0.8
    per_step, grad, outputs = _run("cispo", lower_clip=True)
    weight = np.clip(R, 1 - EPS_LOW, 1 + EPS_HIGH)
    np.testing.assert_allclose(grad, W * -weight * A)
    assert outputs.stats == {"cispo_clip_fraction": pytest.approx(4 / 6)}


def test_sapo_by_hand():
    # gate f = (4 / tau) sigmoid(tau (r - 1)), tau = 1.0 where A > 0, else 1.05; loss -f A;
    # d f / d log pi = (4 / tau) s (1 - s) tau r = 4 s (1 - s) r
    per_step, grad, _ = _run("sapo")
    tau = np.where(A > 0, 1.0, 1.05)
    s = 1 / (1 + np.exp(-tau * (R - 1)))
    np.testing.assert_allclose(per_step, -(4 / tau) * s * A)
    np.testing.assert_allclose(grad, W * -A * 4 * s * (1 - s) * R)
    # on-policy (r = 1) the gradient is the policy gradient's, -A: 4 * 0.5 * 0.5 * 1 = 1 (step 5)
    assert grad[5] == pytest.approx(W[5] * 2.0)
    per_step, _, _ = _run("sapo", tau_pos=2.0, tau_neg=3.0)
    tau = np.where(A > 0, 2.0, 3.0)
    np.testing.assert_allclose(per_step, -(4 / tau) / (1 + np.exp(-tau * (R - 1))) * A)


def test_gpg_by_hand():
    per_step, grad, outputs = _run("gpg")
    np.testing.assert_allclose(per_step, -A * np.log(P_NEW))
    np.testing.assert_allclose(grad, W * -A)
    np.testing.assert_allclose(outputs.ratio.numpy(), R)


def _covariance(valid):
    log_prob = np.log(P_NEW)
    return (A - A[valid].mean()) * (log_prob - log_prob[valid].mean())


def test_clip_cov_by_hand():
    # covariances (A - mean A)(log pi - mean log pi) = (0.531, 0.536, -0.379, 0.169, -0.538, -0.091); steps 0 and 1
    # are clipped already; among the others, those in (lb, ub) = (-0.2, 0.6) are steps 3 and 5. With a ratio of 1 every
    # candidate is cut (no randomness): their loss and gradient are zeroed, the rest is the clipped surrogate.
    cov = _covariance(np.ones(6, bool))
    np.testing.assert_allclose(cov, [0.5309, 0.5363, -0.3792, 0.1691, -0.5381, -0.0910], atol=1e-4)
    per_step, grad, outputs = _run("clip_cov", clip_cov_ratio=1.0, clip_cov_lb=-0.2, clip_cov_ub=0.6)
    keep = np.array([1.0, 1.0, 1.0, 0.0, 1.0, 0.0])
    loss, derivative = _surrogate_oracle(R, A, EPS_LOW, EPS_HIGH)
    np.testing.assert_allclose(per_step, loss * keep)
    np.testing.assert_allclose(grad, W * derivative * keep, atol=1e-15)
    assert outputs.stats == {"clip_cov_fraction": pytest.approx(2 / 6)}
    # a small ratio cuts max(floor(ratio * m), 1) = 1 of the two candidates, drawn at random
    th.manual_seed(0)
    per_step, _, outputs = _run("clip_cov", clip_cov_ratio=0.1, clip_cov_lb=-0.2, clip_cov_ub=0.6)
    cut = np.flatnonzero((per_step == 0) & (loss != 0))
    assert len(cut) == 1 and cut[0] in (3, 5) and outputs.stats == {"clip_cov_fraction": pytest.approx(1 / 6)}
    # a step of weight 0 (left out by top_entropy_quantile) counts in no mean and is never cut
    weights = W.copy()
    weights[3] = 0.0
    valid = weights > 0
    per_step, _, outputs = _run("clip_cov", weights=weights, clip_cov_ratio=1.0, clip_cov_lb=-0.2, clip_cov_ub=0.6)
    candidates = valid & ~np.isin(np.arange(6), [0, 1]) & (_covariance(valid) > -0.2) & (_covariance(valid) < 0.6)
    np.testing.assert_allclose(per_step, loss * ~candidates)
    assert outputs.stats == {"clip_cov_fraction": pytest.approx(candidates.sum() / 5)}


def test_kl_cov_by_hand():
    # k = max(floor(0.34 * 6), 1) = 2 steps of highest covariance, 1 (0.536) and 0 (0.531), get + coef |log r|
    per_step, grad, outputs = _run("kl_cov", kl_cov_ratio=0.34, ppo_kl_coef=0.1)
    log_r = np.log(R)
    penalised = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(per_step, -A * R + 0.1 * np.abs(log_r) * penalised)
    np.testing.assert_allclose(grad, W * (-A * R + 0.1 * np.sign(log_r) * penalised))
    assert outputs.stats == {"kl_cov_fraction": pytest.approx(2 / 6)}
    # no clip at all: step 0's ratio of 1.5 with A > 0 keeps its gradient (the clip would cut it)
    assert grad[0] != 0
    # the defaults (0.0002, 0.1): one step, the one of highest covariance
    per_step, _, outputs = _run("kl_cov")
    np.testing.assert_allclose(per_step, -A * R + 0.1 * np.abs(log_r) * np.array([0, 1, 0, 0, 0, 0]))


def test_geo_mean_by_hand():
    # log r = (0.405, -0.693, 0.405, 0.095, -0.511, 0); clipped in log space to [-0.3, 0.3] on the harmful side only:
    # A > 0 caps from above (step 0: 0.405 -> 0.3; step 4's -0.511 stays), A < 0 from below (step 1: -0.693 -> -0.3;
    # step 2's 0.405 stays)
    low = high = 0.3
    per_step, grad, outputs = _run("geo_mean", eps=(low, high))
    log_r = np.log(R)
    pessimistic = np.where(A > 0, np.minimum(log_r, high), np.maximum(log_r, -low))
    np.testing.assert_allclose(pessimistic, [0.3, -0.3, np.log(1.5), np.log(1.1), np.log(0.6), 0.0])
    lengths = np.array([2.0, 3.0, 1.0])
    ratio_i = np.exp(np.array([pessimistic[i == TRAJECTORY].mean() for i in range(3)]))
    advantage_i = np.array([A[i == TRAJECTORY].mean() for i in range(3)])
    loss_i = -advantage_i * ratio_i
    np.testing.assert_allclose(per_step, loss_i[TRAJECTORY])
    # d loss_i / d log pi_t = -mean(A) R_i / L_i where log r_t was not clipped; each step of i carries loss_i, so the
    # gradient of sum(w * per_step) is that times the trajectory's summed weight
    unclipped = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    weight_i = np.array([W[i == TRAJECTORY].sum() for i in range(3)])
    np.testing.assert_allclose(grad, ((weight_i * -advantage_i * ratio_i / lengths)[TRAJECTORY]) * unclipped)
    assert outputs.stats == {
        "geo_mean_clip_fraction_high": pytest.approx(1 / 6),
        "geo_mean_clip_fraction_low": pytest.approx(1 / 6),
    }
    assert type(sb3_grpo.get_policy_loss("geo_mean")).by_trajectory is True


@pytest.mark.parametrize("name", ["clip", "gspo", "cispo", "sapo", "gpg", "geo_mean"])
def test_losses_add_without_atomics_off_the_cpu(name, monkeypatch):
    """Forward and backward on "meta" tensors (a non-CPU device's code path): the trajectory means of ``gspo`` and
    ``geo_mean`` go through ``trajectory_sums`` (a sorted ``index_put_``), and no loss runs an op that adds with atomics
    on CUDA, so seeded runs reproduce there. (``clip_cov`` and ``kl_cov`` select steps by value, which "meta" tensors
    have not; they run no reduction by index.)"""
    from op_trace import ATOMIC_ON_CUDA, RecordOps

    import sb3_grpo.default_plugins.policy_losses as builtins

    monkeypatch.setattr(builtins, "_fraction", lambda mask: 0.0)  # a statistic reads a value, which "meta" has not
    log_prob = th.zeros(6, device="meta", requires_grad=True)
    inputs = PolicyLossInputs(
        log_prob=log_prob,
        old_log_prob=th.zeros(6, device="meta"),
        advantages=th.ones(6, device="meta"),
        weights=th.ones(6, device="meta"),
        trajectory=th.zeros(6, dtype=th.long, device="meta"),
        n_trajectories=3,
        clip_range_low=0.2,
        clip_range_high=0.2,
    )
    with RecordOps() as ops:
        outputs = sb3_grpo.get_policy_loss(name).compute(inputs)
        outputs.per_step.sum().backward()
    assert not ops.ops & ATOMIC_ON_CUDA
    if BUILTIN_POLICY_LOSSES[name].by_trajectory:
        assert "index_put" in ops.ops


def test_ratio_statistics_read_the_losses_ratio():
    _, _, outputs = _run("clip")
    fraction, low, high, _ = ratio_statistics(outputs.ratio.detach(), th.tensor(A), EPS_LOW, EPS_HIGH)
    # outside [0.8, 1.3]: 1.5, 0.5, 1.5, 0.6; below with A < 0: 0.5; above with A > 0: the first 1.5
    assert (fraction, low, high) == pytest.approx((4 / 6, 1 / 6, 1 / 6))


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("clip", dict(clip_ratio_c=1.0), r"policy loss 'clip': clip_ratio_c must be a number > 1 or None, got 1.0"),
        ("gspo", dict(delta=0.5), r"policy loss 'gspo': delta must be a number > 1 or None"),
        ("sapo", dict(tau_pos=0.0), r"policy loss 'sapo': tau_pos must be a number > 0, got 0.0"),
        ("clip_cov", dict(clip_cov_ratio=0.0), r"clip_cov_ratio must be in \(0, 1\]"),
        ("clip_cov", dict(clip_cov_lb=2.0, clip_cov_ub=1.0), r"clip_cov_ub must be a number > clip_cov_lb \(2.0\)"),
        ("kl_cov", dict(ppo_kl_coef=-1.0), r"ppo_kl_coef must be a number >= 0"),
        ("cispo", dict(lower_clip="yes"), r"lower_clip must be True or False"),
        ("sapo", dict(tau_pos="1"), r"tau_pos must be a number > 0, got '1'"),
    ],
)
def test_bad_options_name_the_loss(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        sb3_grpo.get_policy_loss(name, **kwargs)


def test_an_unknown_option_names_the_loss_and_its_options():
    with pytest.raises(TypeError, match=r"Policy loss 'sapo' does not accept policy_loss_kwargs \['tau'\]; it accepts: "
                       r"tau_pos, tau_neg\."):  # fmt: skip
        GRPO("MlpPolicy", "CartPole-v1", policy_loss="sapo", policy_loss_kwargs=dict(tau=1.0), device="cpu")
    with pytest.raises(TypeError, match=r"Policy loss 'gpg' does not accept .* it accepts: \(no options\)"):
        sb3_grpo.get_policy_loss("gpg", cap=2)


# -------------------------------------------------------------------------
# The KL estimators (k3+ by hand: tests/test_kl.py) and top_entropy_quantile
# -------------------------------------------------------------------------


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3", "k3+"])
def test_kl_estimator_sets_the_penalty(estimator):
    model = make_model("grpo", beta=0.5, kl_estimator=estimator, ref_update_interval=None)
    model.learn(64)
    assert model.kl_estimator == estimator and np.isfinite(model.logger.name_to_value["train/kl_ref"])


def test_entropy_mask_keeps_the_top_quantile():
    entropy = th.tensor([0.1, 0.9, 0.5, 0.3, 0.7])
    # quantile 0.4: keep entropies >= the 0.6-quantile (linear interpolation: 0.5 + 0.4 * (0.7 - 0.5) = 0.58)
    np.testing.assert_array_equal(entropy_mask(entropy, 0.4).numpy(), [0, 1, 0, 0, 1])
    np.testing.assert_array_equal(entropy_mask(entropy, 1.0).numpy(), [1, 1, 1, 1, 1])
    np.testing.assert_array_equal(entropy_mask(entropy, 0.01).numpy(), [0, 1, 0, 0, 0])  # the highest survives


class RecordingLoss(PolicyLoss):
    """The clipped surrogate, recording the weights and entropies it is handed."""

    seen: list[tuple[np.ndarray, np.ndarray]] = []

    def compute(self, inputs):
        RecordingLoss.seen.append((inputs.weights.detach().cpu().numpy(), inputs.entropy.detach().cpu().numpy()))
        return sb3_grpo.get_policy_loss("clip").compute(inputs)


def test_top_entropy_quantile_zeroes_the_weights_of_the_low_entropy_steps(fresh_plugins):
    sb3_grpo.register_policy_loss("recording", RecordingLoss)
    RecordingLoss.seen = []
    model = make_model("grpo", policy_loss="recording", top_entropy_quantile=0.25, batch_size=None, n_epochs=1)
    model.learn(64)
    assert RecordingLoss.seen
    for weights, entropy in RecordingLoss.seen:
        kept = weights > 0
        threshold = np.quantile(entropy, 0.75)
        np.testing.assert_array_equal(kept, entropy >= threshold - 1e-7)
        assert 0 < kept.sum() <= len(kept)
    # the full quantile trains on every step, with the numbers of no quantile (a mask of ones changes no bit)
    full = make_model("grpo", top_entropy_quantile=1.0)
    full.learn(64)
    plain = make_model("grpo")
    plain.learn(64)
    for a, b in zip(full.policy.parameters(), plain.policy.parameters(), strict=True):
        assert th.equal(a, b)


class Poisoned(PolicyLoss):
    """The clipped surrogate, plus a large term on the steps whose weight is zero (those top_entropy_quantile leaves
    out): if they reached the update at all, it would differ from the clean loss's."""

    def compute(self, inputs):
        outputs = sb3_grpo.get_policy_loss("clip").compute(inputs)
        poison = th.where(inputs.weights == 0, 1e3 * inputs.log_prob, th.zeros_like(inputs.log_prob))
        return PolicyLossOutputs(per_step=outputs.per_step + poison, ratio=outputs.ratio)


def test_top_entropy_quantile_drops_the_policy_loss_of_the_masked_steps(fresh_plugins):
    sb3_grpo.register_policy_loss("poisoned", Poisoned)
    poisoned = make_model("grpo", policy_loss="poisoned", top_entropy_quantile=0.3, beta=0.1, ent_coef=0.01)
    poisoned.learn(64)
    clean = make_model("grpo", top_entropy_quantile=0.3, beta=0.1, ent_coef=0.01)
    clean.learn(64)
    for a, b in zip(poisoned.policy.parameters(), clean.policy.parameters(), strict=True):
        assert th.equal(a, b)
    unmasked = make_model("grpo", policy_loss="poisoned", beta=0.1, ent_coef=0.01)  # every weight > 0: no poison
    unmasked.learn(64)
    assert any(not th.equal(a, b) for a, b in zip(unmasked.policy.parameters(), clean.policy.parameters(), strict=True))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kl_estimator="k4"), r"kl_estimator must be one of \('k1', 'k2', 'k3', 'k3\+'\), got 'k4'"),
        (dict(top_entropy_quantile=0.0), r"top_entropy_quantile must be in \(0, 1\]"),
        (dict(top_entropy_quantile=1.5), r"top_entropy_quantile must be in \(0, 1\]"),
        (dict(top_entropy_quantile="0.2"), r"top_entropy_quantile must be a number or None, got '0.2'"),
        (dict(policy_loss=3), r"policy_loss must be a registered policy loss name"),
        (dict(policy_loss_kwargs="dict(delta=2)"), r"policy_loss_kwargs must be a dict of options"),
        (dict(policy_loss="cispo", importance_sampling_level="trajectory"), r"does not combine with policy_loss='cispo'"),
        (dict(policy_loss="nope"), r"Unknown policy loss 'nope'\. Available: cispo, clip, "),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises((ValueError, TypeError, KeyError), match=match):
            make_model("grpo", **kwargs)


def test_an_argument_given_to_load_is_checked(tmp_path):
    path = tmp_path / "model.zip"
    make_model("grpo").save(path)
    with pytest.raises(ValueError, match=r"kl_estimator must be one of .*\(an argument given to load\(\) or stored"):
        GRPO.load(path, env=tiny_env(), device="cpu", kl_estimator="k5")
    with pytest.raises(ValueError, match=r"top_entropy_quantile must be in \(0, 1\] .*\(an argument given to load"):
        GRPO.load(path, env=tiny_env(), device="cpu", custom_objects=dict(top_entropy_quantile=2.0))
    with pytest.raises(TypeError, match=r"Policy loss 'clip' does not accept policy_loss_kwargs \['cap'\]"):
        GRPO.load(path, env=tiny_env(), device="cpu", policy_loss_kwargs=dict(cap=2.0))
    model = GRPO.load(path, env=tiny_env(), device="cpu", policy_loss="sapo", policy_loss_kwargs=dict(tau_neg=2.0))
    assert type(model._policy_loss).__name__ == "SAPO" and model._policy_loss.tau_neg == 2.0
    model.learn(32)


# -------------------------------------------------------------------------
# GRPO with every loss; save and load
# -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BUILTIN_POLICY_LOSSES))
def test_grpo_trains_with_every_builtin_and_logs_its_statistics(name, tmp_path):
    kwargs = dict(clip_ratio_c=3.0, delta=4.0) if name in ("clip", "gspo") else {}
    model = make_model("grpo", policy_loss=name, policy_loss_kwargs=kwargs, beta=0.1, ent_coef=0.01)
    model.learn(64)
    logged = model.logger.name_to_value
    assert np.isfinite(logged["train/policy_gradient_loss"]) and np.isfinite(logged["train/loss"])
    expected = {
        "clip": {"dual_clip_fraction", "delta_clip_fraction"},
        "gspo": {"dual_clip_fraction", "delta_clip_fraction"},
        "cispo": {"cispo_clip_fraction"},
        "clip_cov": {"clip_cov_fraction"},
        "kl_cov": {"kl_cov_fraction"},
        "geo_mean": {"geo_mean_clip_fraction_high", "geo_mean_clip_fraction_low"},
    }.get(name, set())
    for key in expected:
        assert 0.0 <= logged[f"train/{key}"] <= 1.0
    model.save(tmp_path / "model.zip")
    loaded = GRPO.load(tmp_path / "model.zip", env=tiny_env(), device="cpu")
    assert loaded.policy_loss == name and loaded.policy_loss_kwargs == kwargs
    assert type(loaded._policy_loss) is BUILTIN_POLICY_LOSSES[name] and vars(loaded._policy_loss) == vars(model._policy_loss)
    loaded.learn(32)


def test_trajectory_losses_get_whole_trajectories(fresh_plugins):
    seen = []

    class WholeTrajectories(PolicyLoss):
        by_trajectory = True

        def compute(self, inputs):
            seen.append((inputs.trajectory.cpu().numpy(), inputs.n_trajectories))
            return sb3_grpo.get_policy_loss("clip").compute(inputs)

    sb3_grpo.register_policy_loss("whole", WholeTrajectories)
    model = make_model("grpo", policy_loss="whole", batch_size=3)  # TargetEnv: episodes of 5 steps
    model.learn(64)
    for trajectory, n in seen:
        assert np.array_equal(np.bincount(trajectory, minlength=n), np.full(n, 5))
