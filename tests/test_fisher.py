"""Exact Fisher oracles (float64, tiny networks): Fisher == Hessian of the mean KL, exact solves == dense solves."""

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy
from torch import nn
from torch.func import functional_call

from sb3_grpo.common.fisher import (
    ExactFisher,
    actor_parameters,
    closed_form_fisher_problem,
    conjugate_gradient,
    distribution_inputs,
    make_distribution,
    preconditioned_refinement,
)
from sb3_grpo.common.kl import distribution_parameters, exact_kl

ACTION_SPACES = {
    "categorical": spaces.Discrete(3),
    "binary_categorical": spaces.Discrete(2),
    "multicategorical": spaces.MultiDiscrete([3, 2]),
    "bernoulli": spaces.MultiBinary(3),
    "gaussian": spaces.Box(-1.0, 1.0, (2,), dtype=np.float32),
}
OBS_SPACE = spaces.Box(-5.0, 5.0, (3,), dtype=np.float32)


def _policy(kind, net_arch=(5, 4), activation=nn.Tanh, seed=0):
    th.manual_seed(seed)
    policy = ActorCriticPolicy(
        OBS_SPACE,
        ACTION_SPACES[kind],
        lambda _: 1e-3,
        net_arch=list(net_arch),
        activation_fn=activation,
        log_std_init=-0.3,
        share_features_extractor=False,
    )
    return policy.to(th.float64)


def _obs(n=7, seed=1):
    return th.randn(n, 3, generator=th.Generator().manual_seed(seed), dtype=th.float64)


class _KLHead(nn.Module):
    def __init__(self, policy, old):
        super().__init__()
        self.policy = policy
        self.old = old

    def forward(self, obs):
        return exact_kl(self.old, make_distribution(self.policy, distribution_inputs(self.policy, obs))).mean()


def _kl_hessian(policy, obs, params):
    """Autograd Hessian of theta -> mean KL(pi_old || pi_theta) at theta_old, over the flat ``params``."""
    with th.no_grad():
        old = distribution_parameters(make_distribution(policy, distribution_inputs(policy, obs))).clone()
    head = _KLHead(policy, old)
    names = {id(p): "policy." + n for n, p in policy.named_parameters()}
    keys = [names[id(p)] for p in params]
    shapes = [p.shape for p in params]
    theta0 = th.cat([p.detach().reshape(-1) for p in params])

    def f(theta):
        parts, start = {}, 0
        for key, shape in zip(keys, shapes, strict=True):
            n = int(np.prod(shape))
            parts[key] = theta[start : start + n].view(shape)
            start += n
        return functional_call(head, parts, (obs,), strict=False)

    return th.autograd.functional.hessian(f, theta0)


def _rel(a, b):
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("kind", list(ACTION_SPACES))
def test_fisher_equals_kl_hessian(kind):
    policy, obs = _policy(kind), _obs()
    fisher = ExactFisher(policy, obs)
    assert fisher.layers is not None  # MLP: structured path
    hessian = _kl_hessian(policy, obs, fisher.params)
    dense = fisher.matrix()
    assert dense.shape == (fisher.n_params, fisher.n_params)
    assert _rel(dense, hessian) < 1e-6
    # the generic (torch.func) path gives the same matrix
    generic = ExactFisher(policy, obs, structured=False)
    assert generic.layers is None
    assert _rel(generic.matrix(), hessian) < 1e-6
    # matrix-free product
    v = th.randn(fisher.n_params, dtype=th.float64, generator=th.Generator().manual_seed(3))
    assert _rel(fisher.matvec(v), hessian @ v) < 1e-6


@pytest.mark.parametrize("kind", list(ACTION_SPACES))
@pytest.mark.parametrize("damping", [0.1, 1e-3])
def test_exact_solves_match_dense_solve(kind, damping):
    policy, obs = _policy(kind), _obs(n=6)
    fisher = ExactFisher(policy, obs)
    g = th.randn(fisher.n_params, dtype=th.float64, generator=th.Generator().manual_seed(4))
    dense = fisher.matrix() + damping * th.eye(fisher.n_params, dtype=th.float64)
    expected = th.linalg.solve(dense, g)
    x_samples = fisher.solve(g, damping, space="samples")
    x_params = fisher.solve(g, damping, space="parameters")
    assert _rel(x_samples, expected) < 1e-6
    assert _rel(x_params, expected) < 1e-6
    assert _rel(x_samples, x_params) < 1e-6
    # CG on the matrix-free product converges to the same vector
    x_cg = conjugate_gradient(lambda v: fisher.matvec(v) + damping * v, g, max_iter=4 * fisher.n_params, residual_tol=1e-28)
    assert _rel(x_cg, expected) < 1e-6


def test_both_spaces_on_both_sides_of_the_crossover():
    policy = _policy("categorical", net_arch=(4,))
    small, large = ExactFisher(policy, _obs(n=3)), ExactFisher(policy, _obs(n=40))
    assert small.n_directions < small.n_net_params and small.cheaper_space() == "samples"
    assert large.n_directions > large.n_net_params and large.cheaper_space() == "parameters"
    for fisher in (small, large):
        g = th.randn(fisher.n_params, dtype=th.float64, generator=th.Generator().manual_seed(5))
        expected = th.linalg.solve(fisher.matrix() + 0.05 * th.eye(fisher.n_params, dtype=th.float64), g)
        assert _rel(fisher.solve(g, 0.05), expected) < 1e-6


def test_relu_network_and_float32_solve():
    policy = _policy("gaussian", net_arch=(8, 8), activation=nn.ReLU)
    obs = _obs(n=10)
    fisher = ExactFisher(policy, obs)
    assert _rel(fisher.matrix(), _kl_hessian(policy, obs, fisher.params)) < 1e-6
    policy32 = policy.to(th.float32)
    fisher32 = ExactFisher(policy32, obs.float())
    g = th.randn(fisher32.n_params, generator=th.Generator().manual_seed(6))
    expected = th.linalg.solve(fisher.matrix() + 0.1 * th.eye(fisher.n_params, dtype=th.float64), g.double())
    assert _rel(fisher32.solve(g, 0.1).double(), expected) < 1e-4


def test_cnn_actor_uses_generic_jacobians():
    obs_space = spaces.Box(0, 255, (1, 36, 36), dtype=np.uint8)
    th.manual_seed(0)
    policy = ActorCriticCnnPolicy(
        obs_space,
        spaces.Discrete(3),
        lambda _: 1e-3,
        share_features_extractor=False,
        features_extractor_kwargs=dict(features_dim=8),
        net_arch=[],
    ).to(th.float64)
    obs = th.randint(0, 256, (3, 1, 36, 36), generator=th.Generator().manual_seed(0)).to(th.uint8)
    fisher = ExactFisher(policy, obs)
    assert fisher.layers is None  # conv layers: per-sample Jacobians
    g = th.randn(fisher.n_params, dtype=th.float64, generator=th.Generator().manual_seed(7))
    x = fisher.solve(g, 0.1, space="samples")  # P is about 70k: only the Woodbury side is affordable
    assert _rel(fisher.matvec(x) + 0.1 * x, g) < 1e-8


def test_actor_parameters_exclude_the_critic():
    policy = _policy("gaussian")
    names = [n for n, _ in actor_parameters(policy, _obs(n=2))]
    assert "log_std" in names and names
    assert not any("value" in n for n in names)


def test_gsde_has_no_closed_form():
    th.manual_seed(0)
    policy = ActorCriticPolicy(OBS_SPACE, ACTION_SPACES["gaussian"], lambda _: 1e-3, use_sde=True)
    assert "gSDE" in closed_form_fisher_problem(policy)
    with pytest.raises(NotImplementedError, match="gSDE"):
        ExactFisher(policy, _obs(n=2).float())


@pytest.mark.parametrize("kind", ["categorical", "gaussian", "bernoulli"])
def test_natural_step_respects_the_trust_region(kind):
    policy, obs = _policy(kind, net_arch=(16, 16)), _obs(n=64)
    fisher = ExactFisher(policy, obs)
    with th.no_grad():
        old = distribution_parameters(make_distribution(policy, distribution_inputs(policy, obs))).clone()
    # a policy gradient: mean(advantage * log pi(a|s)) for sampled actions and random advantages
    th.manual_seed(8)
    dist = make_distribution(policy, distribution_inputs(policy, obs))
    actions = dist.sample()
    advantages = th.randn(len(obs), dtype=th.float64)
    grads = th.autograd.grad((advantages * dist.log_prob(actions)).mean(), fisher.params)
    g = th.cat([gr.reshape(-1) for gr in grads])
    x = fisher.solve(g, 0.1)
    delta = 0.01
    alpha = (2 * delta / g.dot(x)).sqrt()
    with th.no_grad():
        start = 0
        for p in fisher.params:
            p += alpha * x[start : start + p.numel()].view_as(p)
            start += p.numel()
        kl = exact_kl(old, make_distribution(policy, distribution_inputs(policy, obs))).mean()
    # quadratic model: KL ~ delta * x^T F x / x^T (F + lambda) x <= delta; the cubic remainder is tiny here
    assert 0 < float(kl) <= delta * 1.05


@pytest.mark.parametrize("kind", list(ACTION_SPACES))
@pytest.mark.parametrize("structured", [None, False])
def test_subset_is_the_fisher_of_those_states(kind, structured):
    policy, obs = _policy(kind), _obs(n=9)
    idx = th.tensor([0, 3, 4, 8])
    sub = ExactFisher(policy, obs, structured=structured).subset(idx)
    assert sub.n_states == 4 and sub.n_directions == 4 * sub.k
    expected = _kl_hessian(policy, obs[idx], sub.params)
    assert _rel(sub.matrix(), expected) < 1e-6
    g = th.randn(sub.n_params, dtype=th.float64, generator=th.Generator().manual_seed(9))
    dense = expected + 0.05 * th.eye(sub.n_params, dtype=th.float64)
    for space in ("samples", "parameters"):
        assert _rel(sub.factorize(0.05, space=space)(g), th.linalg.solve(dense, g)) < 1e-6


@pytest.mark.parametrize("kind", ["categorical", "gaussian", "multicategorical"])
def test_preconditioned_refinement_solves_the_whole_batch_system(kind):
    # the subsample's exact factorisation preconditions CG on the whole batch's Fisher: the answer is the dense
    # solve of the WHOLE batch's damped Fisher (the Hessian of its mean KL), not the subsample's
    policy, obs = _policy(kind, net_arch=(6, 5)), _obs(n=40)
    fisher = ExactFisher(policy, obs)
    damping = 0.02
    dense = _kl_hessian(policy, obs, fisher.params) + damping * th.eye(fisher.n_params, dtype=th.float64)
    g = th.randn(fisher.n_params, dtype=th.float64, generator=th.Generator().manual_seed(10))
    expected = th.linalg.solve(dense, g)
    precondition = fisher.subset(th.arange(0, 40, 8)).factorize(damping)
    assert _rel(precondition(g), expected) > 1e-2  # the subsample alone is not the batch's solution

    def matvec(v):
        return fisher.matvec(v) + damping * v

    x, iters, residual = preconditioned_refinement(matvec, precondition, g, max_iter=200, tol=1e-10)
    assert 0 < iters < fisher.n_params
    assert residual <= 1e-10 and abs(residual - _rel(dense @ x, g)) < 1e-12
    assert _rel(x, expected) < 1e-7
    # a loose tolerance stops early, at a residual it reports truthfully
    x1, iters1, residual1 = preconditioned_refinement(matvec, precondition, g, max_iter=200, tol=0.1)
    assert iters1 < iters and residual1 <= 0.1 and abs(residual1 - _rel(dense @ x1, g)) < 1e-12
    # no iterations allowed: the preconditioner's own solution
    x0, iters0, _ = preconditioned_refinement(matvec, precondition, g, max_iter=0, tol=1e-10)
    assert iters0 == 0 and th.equal(x0, precondition(g))
