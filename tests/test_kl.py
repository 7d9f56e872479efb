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


def test_k3_plus_by_hand():
    """verl's straight-through "k3+": the value of k3, ``e^x - 1 - x``, bit for bit, and the gradient of k2,
    ``d(x^2 / 2)/dx = x`` (k3's own would be ``e^x - 1``)."""
    x = th.tensor([np.log(2.0), 0.0, np.log(0.5), -1.3], dtype=th.float64, requires_grad=True)
    value = kl_estimate(x, "k3+")
    assert th.equal(value.detach(), kl_estimate(x.detach(), "k3"))
    np.testing.assert_allclose(value.detach().numpy(), [2 - np.log(2) - 1, 0.0, 0.5 - np.log(0.5) - 1, np.exp(-1.3) + 0.3])
    value.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [np.log(2.0), 0.0, np.log(0.5), -1.3])


def test_k3_formula_by_hand():
    # r = pi_ref / pi_theta = 2: k3 = r - log r - 1
    log_ratio = th.tensor([np.log(2.0), 0.0, np.log(0.5)], dtype=th.float32)
    expected = th.tensor([2 - np.log(2) - 1, 0.0, 0.5 - np.log(0.5) - 1], dtype=th.float32)
    th.testing.assert_close(kl_estimate(log_ratio, "k3"), expected)
    with pytest.raises(ValueError, match="k1"):
        kl_estimate(log_ratio, "k4")


def _gsde_pair(full_std, squash, n=6, latent_dim=4, action_dim=2, seed=0):
    """Two gSDE distributions (float64) on the same states: the latent and, per distribution, (dist, mean, log_std)."""
    g = th.Generator().manual_seed(seed)
    out = []
    latent = th.randn(n, latent_dim, generator=g, dtype=th.float64)
    for _ in range(2):
        dist = StateDependentNoiseDistribution(action_dim, full_std=full_std, squash_output=squash)
        _, log_std = dist.proba_distribution_net(latent_dim=latent_dim)
        log_std = (0.4 * th.randn(log_std.shape, generator=g, dtype=th.float64)).requires_grad_()
        mean = th.randn(n, action_dim, generator=g, dtype=th.float64).requires_grad_()
        dist.proba_distribution(mean, log_std, latent)
        out.append((dist, mean, log_std))
    return latent, out


@pytest.mark.parametrize("full_std", [True, False])
@pytest.mark.parametrize("squash", [False, True])
def test_gsde_exact_kl_is_the_gaussian_kl_of_its_per_state_variance(full_std, squash):
    """gSDE at a state is N(mu, sigma^2), sigma_i^2 = sum_j latent_j^2 exp(log_std_ji)^2 + eps (full_std=False: one
    log_std column for every action): the exact KL against torch's Normal KL built by hand from that formula, values
    and gradients in the new distribution's mean and log_std."""
    latent, [(d1, m1, ls1), (d2, m2, ls2)] = _gsde_pair(full_std, squash)
    ours = exact_kl(distribution_parameters(d1), d2)
    sigma1 = th.sqrt(latent**2 @ th.exp(ls1.detach()).expand(4, 2) ** 2 + d1.epsilon)
    sigma2 = th.sqrt(latent**2 @ th.exp(ls2).expand(4, 2) ** 2 + d2.epsilon)
    theirs = kl_divergence(Normal(m1.detach(), sigma1), Normal(m2, sigma2)).sum(-1)
    assert ours.shape == (6,) and float(ours.min()) > 0
    th.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
    grads_ours = th.autograd.grad(ours.sum(), [m2, ls2], retain_graph=True)
    grads_theirs = th.autograd.grad(theirs.sum(), [m2, ls2])
    for a, b in zip(grads_ours, grads_theirs, strict=True):
        assert a.abs().sum() > 0
        th.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    th.testing.assert_close(exact_kl(distribution_parameters(d1), d1), th.zeros(6, dtype=th.float64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("squash", [False, True])
def test_gsde_exact_kl_against_monte_carlo_on_sb3_log_probs(squash):
    """Monte-Carlo oracle on SB3's own log-probabilities: mean of log p(a) - log q(a) over actions a ~ p, sampled from
    the per-state Gaussian (then tanh-squashed, whose log_prob carries SB3's Jacobian correction: KL is unchanged by the
    squashing)."""
    _, [(d1, _, _), (d2, _, _)] = _gsde_pair(True, squash, n=3)
    th.manual_seed(0)
    n_samples = 200_000
    x = d1.distribution.sample((n_samples,))  # (S, N, d), pre-squashing
    actions = th.tanh(x) if squash else x
    flat = actions.reshape(-1, 2)
    with th.no_grad():
        rep1 = StateDependentNoiseDistribution(2, squash_output=squash)
        rep2 = StateDependentNoiseDistribution(2, squash_output=squash)
        for rep, dist in ((rep1, d1), (rep2, d2)):
            mean, std = dist.distribution.mean.detach(), dist.distribution.stddev.detach()
            rep.distribution = Normal(mean.repeat(n_samples, 1), std.repeat(n_samples, 1))
        log_ratio = (rep1.log_prob(flat) - rep2.log_prob(flat)).view(n_samples, 3)
    mc, sem = log_ratio.mean(0), log_ratio.std(0) / np.sqrt(n_samples)
    exact = exact_kl(distribution_parameters(d1), d2).detach()
    assert (th.abs(mc - exact) < 5 * sem + 1e-3).all(), (mc, exact, sem)
