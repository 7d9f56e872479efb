"""Property-based tests (hypothesis) over random shapes and values: advantage estimators, KL estimators and exact
KL, and the exact Fisher (against a dense ``J^T M J`` built here from autograd Jacobians and hand-written ``M``)."""

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    MultiCategoricalDistribution,
)
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn
from torch.distributions import Bernoulli, Categorical, Normal
from torch.distributions import kl_divergence as torch_kl
from torch.func import functional_call

from sb3_grpo import AdvantageInputs, get_advantage_estimator
from sb3_grpo.common.advantages import run_estimator
from sb3_grpo.common.kl import distribution_parameters, exact_kl, kl_estimate
from sb3_grpo.exact_trpo.actor import distribution_inputs
from sb3_grpo.exact_trpo.fisher import ExactFisher

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -------------------------------------------------------------------------
# Advantage estimators
# -------------------------------------------------------------------------

#: Outcome estimators: one advantage per trajectory, computed from the outcome rewards within the group.
OUTCOME = ("group_zscore", "group_mean", "leave_one_out")
#: Step estimators: per-step advantages from the per-step rewards of a group.
STEP = ("group_process", "group_step_baseline")


@st.composite
def group_batches(draw, equal_lengths=False):
    """``(step_rewards, group_ids)``: 1-3 groups of 2-4 trajectories of 1-6 steps, rewards in [-50, 50]."""
    seed = draw(st.integers(0, 2**31 - 1))
    n_groups = draw(st.integers(1, 3))
    size = draw(st.integers(2, 4))
    rng = np.random.default_rng(seed)
    steps, ids = [], []
    for g in range(n_groups):
        length = int(rng.integers(1, 7))
        for _ in range(size):
            n = length if equal_lengths else int(rng.integers(1, 7))
            steps.append(np.round(rng.uniform(-50, 50, size=n), 3))
            ids.append(g)
    return steps, np.array(ids)


def _inputs(steps, ids, outcomes=None):
    return AdvantageInputs.from_trajectories(steps, gamma=0.9, outcome_rewards=outcomes, group_ids=ids)


def _adv(name, inputs, **kwargs):
    return run_estimator(get_advantage_estimator(name, **kwargs), inputs).advantages


def _spread_ok(steps, ids, per_step):
    """Every group is either flat or well spread (so that ``eps`` in a std division is negligible)."""
    for g in np.unique(ids):
        values = (
            np.concatenate([steps[i] for i in np.flatnonzero(ids == g)])
            if per_step
            else [steps[i].sum() for i in np.flatnonzero(ids == g)]
        )
        if np.ptp(values) > 0 and np.std(values) < 1e-2:
            return False
    return True


@SETTINGS
@given(batch=group_batches(), name=st.sampled_from(OUTCOME + STEP + ("reinforce_baseline",)))
def test_group_estimators_are_finite_shaped_and_zero_on_padding(batch, name):
    steps, ids = batch
    inputs = _inputs(steps, ids)
    out = _adv(name, inputs)
    assert out.shape == inputs.shape == (max(len(s) for s in steps), len(steps))
    assert np.all(np.isfinite(out))
    assert np.all(out[~inputs.valid] == 0.0)


@SETTINGS
@given(batch=group_batches(equal_lengths=True), name=st.sampled_from(OUTCOME + STEP), data=st.data())
def test_adding_a_constant_to_a_group_changes_nothing(batch, name, data):
    """A per-group constant added to every member (to its outcome, or to each of its step rewards) cancels in the
    group baseline. Members of a group have equal lengths here, so their rewards-to-go shift alike."""
    steps, ids = batch
    shifts = np.array([data.draw(st.integers(-20, 20)) for _ in range(ids.max() + 1)], dtype=float)
    moved_steps = [s + shifts[g] for s, g in zip(steps, ids, strict=True)]
    if name in OUTCOME:
        outcomes = np.array([s.sum() for s in steps])
        base = _inputs(steps, ids, outcomes)
        moved = _inputs(steps, ids, outcomes + shifts[ids])
    else:
        base, moved = _inputs(steps, ids), _inputs(moved_steps, ids)
    a, b = _adv(name, base), _adv(name, moved)
    np.testing.assert_allclose(b, a, atol=1e-6 * (1 + np.abs(a).max()))


@SETTINGS
@given(batch=group_batches(), name=st.sampled_from(OUTCOME + STEP), scale=st.floats(0.05, 20))
def test_scaling_the_rewards(batch, name, scale):
    """Normalising estimators are invariant to a positive scale of the rewards; unnormalised ones scale linearly."""
    steps, ids = batch
    assume(_spread_ok(steps, ids, per_step=name in STEP))
    options = {"eps": 1e-12}
    scaled_steps = [scale * s for s in steps]
    a, b = _adv(name, _inputs(steps, ids), **options), _adv(name, _inputs(scaled_steps, ids), **options)
    linear = name in ("group_mean", "leave_one_out")  # default scale="none"
    np.testing.assert_allclose(b, scale * a if linear else a, rtol=1e-6, atol=1e-6 * (1 + np.abs(b).max()))
    if name == "group_step_baseline":  # scale="none": linear too
        none_a = _adv(name, _inputs(steps, ids), scale="none")
        none_b = _adv(name, _inputs(scaled_steps, ids), scale="none")
        np.testing.assert_allclose(none_b, scale * none_a, rtol=1e-6, atol=1e-6 * (1 + np.abs(none_b).max()))


@pytest.mark.filterwarnings("ignore:group_process")  # a batch of one flat group: the warning is right
@SETTINGS
@given(batch=group_batches(), name=st.sampled_from(OUTCOME + STEP), flat_group=st.integers(0, 2), value=st.integers(-9, 9))
def test_a_group_whose_members_are_all_equal_gets_exactly_zero(batch, name, flat_group, value):
    steps, ids = batch
    flat_group = min(flat_group, int(ids.max()))
    members = np.flatnonzero(ids == flat_group)
    steps = list(steps)
    if name == "group_process":  # compares per-step rewards: every step reward of the group is equal
        for i in members:
            steps[i] = np.full(len(steps[i]), float(value))
    else:  # identical trajectories (hence identical outcomes and rewards-to-go)
        for i in members:
            steps[i] = steps[members[0]].copy()
    inputs = _inputs(steps, ids)
    out = _adv(name, inputs)
    assert np.all(np.isfinite(out))
    assert np.all(out[:, members] == 0.0)


@st.composite
def critic_batches(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    t, b = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    rng = np.random.default_rng(seed)
    starts = (rng.random((t, b)) < 0.3).astype(np.float32)
    return AdvantageInputs(
        rewards=rng.normal(size=(t, b)).astype(np.float32),
        episode_starts=starts,
        values=rng.normal(size=(t, b)).astype(np.float32),
        last_values=rng.normal(size=b).astype(np.float32),
        dones=rng.random(b) < 0.5,
        gamma=float(rng.uniform(0.5, 1.0)),
        gae_lambda=float(rng.uniform(0.0, 1.0)),
    )


@SETTINGS
@given(inputs=critic_batches(), name=st.sampled_from(("gae", "td", "monte_carlo", "n_step")))
def test_critic_estimators_finite_shaped_and_returns_are_advantages_plus_values(inputs, name):
    out = run_estimator(get_advantage_estimator(name), inputs)
    assert out.advantages.shape == out.returns.shape == inputs.shape
    assert np.all(np.isfinite(out.advantages)) and np.all(np.isfinite(out.returns))
    np.testing.assert_allclose(out.returns, out.advantages + inputs.values, rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------------------
# KL estimators and the exact KL
# -------------------------------------------------------------------------

log_ratios = st.lists(st.floats(-20, 20, allow_nan=False), min_size=1, max_size=16).map(
    lambda xs: th.tensor(xs, dtype=th.float64)
)


@SETTINGS
@given(log_ratio=log_ratios)
def test_sampled_kl_estimators_finite_and_k2_k3_nonnegative(log_ratio):
    for name in ("k1", "k2", "k3"):
        value = kl_estimate(log_ratio, name)
        assert value.shape == log_ratio.shape and bool(th.isfinite(value).all())
    k3 = kl_estimate(log_ratio, "k3")
    assert bool((k3 >= 0).all()) and bool((kl_estimate(log_ratio, "k2") >= 0).all())
    # k3 = e^x - 1 - x is zero exactly where the ratio is one, and grows at least like x^2 / 2 for x > 0
    # (checked where x^2 / 2 is well above the rounding of e^x - 1 - x)
    assert bool((k3[log_ratio == 0] == 0).all())
    positive = log_ratio > 1e-4
    assert bool((k3[positive] >= 0.5 * log_ratio[positive] ** 2 * (1 - 1e-6)).all())


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 5), k=st.integers(2, 6), spread=st.floats(0.1, 5))
def test_k1_and_k3_averaged_over_the_support_are_the_exact_kl(seed, n, k, spread):
    """``E_{x~p}[k1] = E_{x~p}[k3] = KL(p || q)``: summed over a categorical support (no sampling), so exactly."""
    gen = th.Generator().manual_seed(seed)
    p_logits, q_logits = spread * th.randn(2, n, k, generator=gen, dtype=th.float64)
    p, q = Categorical(logits=p_logits), Categorical(logits=q_logits)
    log_ratio = q.logits - p.logits  # (n, k): log q(x) - log p(x) for every x
    expected = torch_kl(p, q)
    for name in ("k1", "k3"):
        th.testing.assert_close((p.probs * kl_estimate(log_ratio, name)).sum(dim=1), expected, rtol=1e-9, atol=1e-10)


def _sb3_pair(kind, n, gen, spread):
    """Two SB3 distributions of one kind on ``n`` states, and their torch counterparts (summed over dims)."""

    def rand(*shape):
        return spread * th.randn(*shape, generator=gen, dtype=th.float64)

    if kind == "categorical":
        make = lambda: CategoricalDistribution(4).proba_distribution(action_logits=rand(n, 4))  # noqa: E731
    elif kind == "multicategorical":
        make = lambda: MultiCategoricalDistribution([3, 2]).proba_distribution(action_logits=rand(n, 5))  # noqa: E731
    elif kind == "bernoulli":
        make = lambda: BernoulliDistribution(3).proba_distribution(action_logits=rand(n, 3))  # noqa: E731
    else:
        make = lambda: DiagGaussianDistribution(2).proba_distribution(rand(n, 2), rand(2).clamp(-3, 3))  # noqa: E731
    return make(), make()


def _torch_kl(kind, old, new):
    """KL(old || new) per state, built from the raw parameters with torch.distributions alone."""
    if kind == "categorical":
        return torch_kl(Categorical(logits=old.distribution.logits), Categorical(logits=new.distribution.logits))
    if kind == "multicategorical":
        return sum(
            torch_kl(Categorical(logits=a.logits), Categorical(logits=b.logits))
            for a, b in zip(old.distribution, new.distribution, strict=True)
        )
    if kind == "bernoulli":
        return torch_kl(Bernoulli(logits=old.distribution.logits), Bernoulli(logits=new.distribution.logits)).sum(dim=1)
    a, b = old.distribution, new.distribution
    return torch_kl(Normal(a.mean, a.stddev), Normal(b.mean, b.stddev)).sum(dim=1)


KINDS = ("categorical", "multicategorical", "bernoulli", "gaussian")


@SETTINGS
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 2**31 - 1), n=st.integers(1, 6), spread=st.floats(0.01, 4))
def test_exact_kl_is_nonnegative_zero_on_itself_and_agrees_with_torch(kind, seed, n, spread):
    old, new = _sb3_pair(kind, n, th.Generator().manual_seed(seed), spread)
    kl = exact_kl(distribution_parameters(old), new)
    assert kl.shape == (n,) and bool(th.isfinite(kl).all())
    assert bool((kl >= -1e-12).all())
    th.testing.assert_close(kl, _torch_kl(kind, old, new), rtol=1e-9, atol=1e-12)
    th.testing.assert_close(exact_kl(distribution_parameters(old), old), th.zeros(n, dtype=th.float64), rtol=0, atol=1e-12)
    if kind == "gaussian":  # the closed form by hand
        m1, s1, m2, s2 = old.distribution.mean, old.distribution.stddev, new.distribution.mean, new.distribution.stddev
        by_hand = (th.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5).sum(dim=1)
        th.testing.assert_close(kl, by_hand, rtol=1e-9, atol=1e-12)


# -------------------------------------------------------------------------
# The exact Fisher
# -------------------------------------------------------------------------

FISHER_SPACES = {
    "categorical": lambda rng: spaces.Discrete(int(rng.integers(2, 5))),
    "multicategorical": lambda rng: spaces.MultiDiscrete([int(rng.integers(2, 4)), int(rng.integers(2, 4))]),
    "bernoulli": lambda rng: spaces.MultiBinary(int(rng.integers(1, 4))),
    "gaussian": lambda rng: spaces.Box(-1.0, 1.0, (int(rng.integers(1, 3)),), dtype=np.float32),
}


class _PhiHead(nn.Module):
    """``theta -> phi(s)``: the distribution's parameters (logits; Gaussian: mean and log_std) on every state."""

    def __init__(self, policy):
        super().__init__()
        self.policy = policy

    def forward(self, obs):
        z = distribution_inputs(self.policy, obs)
        if isinstance(self.policy.action_dist, DiagGaussianDistribution):
            return th.cat([z, self.policy.log_std.expand_as(z)], dim=1)
        return z


def _categorical_m(logits):
    p = th.softmax(logits, dim=0)
    return th.diag(p) - th.outer(p, p)


def _dense_fisher(policy, obs, params):
    """``mean_n J_n^T M_n J_n`` with ``J_n`` from autograd and ``M_n`` written out per distribution."""
    head = _PhiHead(policy)
    names = {id(p): "policy." + name for name, p in policy.named_parameters()}
    keys, shapes = [names[id(p)] for p in params], [p.shape for p in params]
    theta0 = th.cat([p.detach().reshape(-1) for p in params])

    def phi(theta):
        parts, start = {}, 0
        for key, shape in zip(keys, shapes, strict=True):
            size = int(np.prod(shape))
            parts[key] = theta[start : start + size].view(shape)
            start += size
        return functional_call(head, parts, (obs,), strict=False)

    jac = th.autograd.functional.jacobian(phi, theta0)  # (N, d_phi, P)
    with th.no_grad():
        values = phi(theta0)
    dist = policy.action_dist
    total = th.zeros(len(theta0), len(theta0), dtype=th.float64)
    for n in range(len(values)):
        v = values[n]
        if isinstance(dist, MultiCategoricalDistribution):
            m = th.block_diag(*[_categorical_m(chunk) for chunk in th.split(v, list(dist.action_dims))])
        elif isinstance(dist, CategoricalDistribution):
            m = _categorical_m(v)
        elif isinstance(dist, BernoulliDistribution):
            p = th.sigmoid(v)
            m = th.diag(p * (1 - p))
        else:
            d = len(v) // 2
            m = th.diag(th.cat([th.exp(-2 * v[d:]), th.full((d,), 2.0, dtype=th.float64)]))
        total += jac[n].T @ m @ jac[n]
    return total / len(values)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(tuple(FISHER_SPACES)),
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(1, 6),
    obs_dim=st.integers(1, 3),
    hidden=st.lists(st.integers(1, 5), min_size=0, max_size=2),
    damping=st.sampled_from([1e-2, 0.1, 1.0]),
)
def test_fisher_is_symmetric_psd_equals_dense_jtmj_and_both_solves_agree(kind, seed, n, obs_dim, hidden, damping):
    rng = np.random.default_rng(seed)
    th.manual_seed(seed)
    obs_space = spaces.Box(-5.0, 5.0, (obs_dim,), dtype=np.float32)
    policy = ActorCriticPolicy(
        obs_space,
        FISHER_SPACES[kind](rng),
        lambda _: 1e-3,
        net_arch=dict(pi=list(hidden), vf=[2]),
        activation_fn=nn.Tanh,
        log_std_init=float(rng.uniform(-1, 0.5)),
        share_features_extractor=False,
    ).to(th.float64)
    obs = th.as_tensor(rng.normal(size=(n, obs_dim)) * 2)
    fisher = ExactFisher(policy, obs)
    f = fisher.matrix()
    scale = float(f.abs().max()) + 1e-12
    th.testing.assert_close(f, f.T, rtol=0, atol=1e-12 * scale)
    assert float(th.linalg.eigvalsh(f).min()) >= -1e-9 * scale
    dense = _dense_fisher(policy, obs, fisher.params)
    th.testing.assert_close(f, dense, rtol=1e-7, atol=1e-10 * scale)
    v = th.as_tensor(rng.normal(size=fisher.n_params))
    th.testing.assert_close(fisher.matvec(v), dense @ v, rtol=1e-7, atol=1e-9 * (1 + float((dense @ v).abs().max())))

    g = th.as_tensor(rng.normal(size=fisher.n_params))
    expected = th.linalg.solve(dense + damping * th.eye(fisher.n_params, dtype=th.float64), g)
    x_samples = fisher.solve(g, damping, space="samples")  # Woodbury, N k x N k
    x_params = fisher.solve(g, damping, space="parameters")  # P x P
    tol = dict(rtol=1e-6, atol=1e-8 * (1 + float(expected.abs().max())))
    th.testing.assert_close(x_samples, x_params, **tol)
    th.testing.assert_close(x_params, expected, **tol)


@pytest.mark.parametrize("kind", ["categorical", "gaussian"])
def test_dense_oracle_is_not_trivially_equal(kind):
    """The oracle above can tell Fisher matrices apart: a different policy gives a different matrix."""
    rng = np.random.default_rng(0)
    obs_space = spaces.Box(-5.0, 5.0, (2,), dtype=np.float32)
    action_space = spaces.Discrete(3) if kind == "categorical" else spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    policies = []
    for seed in (0, 1):
        th.manual_seed(seed)
        policies.append(
            ActorCriticPolicy(obs_space, action_space, lambda _: 1e-3, net_arch=[3], share_features_extractor=False).to(
                th.float64
            )
        )
    obs = th.as_tensor(rng.normal(size=(4, 2)))
    a = ExactFisher(policies[0], obs)
    assert not th.allclose(a.matrix(), _dense_fisher(policies[1], obs, ExactFisher(policies[1], obs).params))
