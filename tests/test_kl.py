"""KL oracles: the analytic KL against torch's kl_divergence, the sampled estimators against the exact KL."""

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)
from torch.distributions import Bernoulli, Categorical, Normal, kl_divergence

from sb3_grpo.common.kl import distribution_parameters, exact_kl, kl_estimate


def _pair(kind, n=5, seed=0):
    g = th.Generator().manual_seed(seed)
    if kind == "categorical":
        d1, d2 = CategoricalDistribution(4), CategoricalDistribution(4)
        d1.proba_distribution(th.randn(n, 4, generator=g))
        d2.proba_distribution(th.randn(n, 4, generator=g))
    elif kind == "multicategorical":
        d1, d2 = MultiCategoricalDistribution([3, 2]), MultiCategoricalDistribution([3, 2])
        d1.proba_distribution(th.randn(n, 5, generator=g))
        d2.proba_distribution(th.randn(n, 5, generator=g))
    elif kind == "bernoulli":
        d1, d2 = BernoulliDistribution(3), BernoulliDistribution(3)
        d1.proba_distribution(th.randn(n, 3, generator=g))
        d2.proba_distribution(th.randn(n, 3, generator=g))
    else:
        d1, d2 = DiagGaussianDistribution(2), DiagGaussianDistribution(2)
        d1.proba_distribution(th.randn(n, 2, generator=g), 0.3 * th.randn(2, generator=g))
        d2.proba_distribution(th.randn(n, 2, generator=g), 0.3 * th.randn(2, generator=g))
    return d1, d2


def _hand_kl(kind, d1, d2):
    """KL(d1 || d2) written out by hand from the distribution formulas."""
    if kind in ("categorical", "multicategorical"):
        dists1 = d1.distribution if isinstance(d1.distribution, list) else [d1.distribution]
        dists2 = d2.distribution if isinstance(d2.distribution, list) else [d2.distribution]
        return sum((a.probs * (a.logits - b.logits)).sum(-1) for a, b in zip(dists1, dists2, strict=True))
    if kind == "bernoulli":
        p, q = d1.distribution.probs, d2.distribution.probs
        return (p * th.log(p / q) + (1 - p) * th.log((1 - p) / (1 - q))).sum(-1)
    m1, s1 = d1.distribution.mean, d1.distribution.stddev
    m2, s2 = d2.distribution.mean, d2.distribution.stddev
    return (th.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5).sum(-1)


@pytest.mark.parametrize("kind", ["categorical", "multicategorical", "bernoulli", "gaussian"])
def test_exact_kl_matches_hand_formula(kind):
    d1, d2 = _pair(kind)
    got = exact_kl(distribution_parameters(d1), d2)
    assert got.shape == (5,)
    th.testing.assert_close(got, _hand_kl(kind, d1, d2), rtol=1e-5, atol=1e-6)
    # and KL(p || p) = 0
    th.testing.assert_close(exact_kl(distribution_parameters(d1), d1), th.zeros(5), atol=1e-6, rtol=0)


def _torch_kl(kind, d1, d2):
    """torch.distributions' own KL, summed over independent components."""
    if kind in ("categorical", "multicategorical"):
        dists1 = d1.distribution if isinstance(d1.distribution, list) else [d1.distribution]
        dists2 = d2.distribution if isinstance(d2.distribution, list) else [d2.distribution]
        return sum(
            kl_divergence(Categorical(logits=a.logits), Categorical(logits=b.logits))
            for a, b in zip(dists1, dists2, strict=True)
        )
    if kind == "bernoulli":
        return kl_divergence(Bernoulli(logits=d1.distribution.logits), Bernoulli(logits=d2.distribution.logits)).sum(-1)
    return kl_divergence(
        Normal(d1.distribution.mean, d1.distribution.stddev), Normal(d2.distribution.mean, d2.distribution.stddev)
    ).sum(-1)


@pytest.mark.parametrize("kind", ["categorical", "multicategorical", "bernoulli", "gaussian"])
def test_exact_kl_matches_torch_kl_divergence_values_and_gradients(kind):
    """Our closed forms (written on tensors, for speed) against torch's kl_divergence: values and the gradient with
    respect to the new distribution's parameters, which is what the penalty's backward pass uses."""
    d1, d2 = _pair(kind)
    if kind == "gaussian":  # rebuild d2 on leaves so both KLs can be differentiated
        mean, log_std = d2.distribution.mean.detach().requires_grad_(), th.log(d2.distribution.stddev[0]).detach()
        log_std.requires_grad_()
        d2.proba_distribution(mean, log_std)
        leaves = [mean, log_std]
    else:
        logits = th.cat(
            [d.logits for d in d2.distribution] if isinstance(d2.distribution, list) else [d2.distribution.logits], dim=1
        )
        leaves = [logits.detach().requires_grad_()]
        d2.proba_distribution(leaves[0])
    ours = exact_kl(distribution_parameters(d1), d2)
    theirs = _torch_kl(kind, d1, d2)
    th.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    grads_ours = th.autograd.grad(ours.sum(), leaves, retain_graph=True)
    grads_theirs = th.autograd.grad(theirs.sum(), leaves)
    for a, b in zip(grads_ours, grads_theirs, strict=True):
        assert a.abs().sum() > 0
        th.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_exact_kl_is_differentiable_in_the_new_distribution():
    logits = th.randn(3, 4, requires_grad=True)
    d_old, d_new = CategoricalDistribution(4), CategoricalDistribution(4)
    d_old.proba_distribution(th.randn(3, 4))
    d_new.proba_distribution(logits)
    exact_kl(distribution_parameters(d_old), d_new).sum().backward()
    assert logits.grad is not None and th.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0


@pytest.mark.parametrize("estimator, unbiased", [("k1", True), ("k3", True), ("k2", False)])
def test_sampled_estimators_against_exact_kl(estimator, unbiased):
    th.manual_seed(0)
    p = Normal(th.tensor([0.0]), th.tensor([1.0]))
    q = Normal(th.tensor([0.7]), th.tensor([1.3]))
    exact = kl_divergence(p, q).item()
    x = p.sample((400_000,))
    est = kl_estimate(q.log_prob(x) - p.log_prob(x), estimator).double()
    mean, sem = est.mean().item(), est.std().item() / np.sqrt(len(est))
    if unbiased:
        assert abs(mean - exact) < 5 * sem + 1e-4, (mean, exact, sem)
    else:  # k2 is biased here: the point of the comparison is that the bias is real and visible
        assert abs(mean - exact) > 5 * sem
    if estimator == "k3":
        assert (est >= 0).all()


def test_k3_formula_by_hand():
    # r = pi_ref / pi_theta = 2: k3 = r - log r - 1
    log_ratio = th.tensor([np.log(2.0), 0.0, np.log(0.5)], dtype=th.float32)
    expected = th.tensor([2 - np.log(2) - 1, 0.0, 0.5 - np.log(0.5) - 1], dtype=th.float32)
    th.testing.assert_close(kl_estimate(log_ratio, "k3"), expected)
    with pytest.raises(ValueError, match="k1"):
        kl_estimate(log_ratio, "k4")


def test_squashed_gsde_refused():
    dist = StateDependentNoiseDistribution(2, squash_output=True)
    with pytest.raises(NotImplementedError, match="closed form"):
        distribution_parameters(dist)
