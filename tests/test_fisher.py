"""Exact Fisher oracles (float64, tiny networks): Fisher == Hessian of the mean KL, exact solves == dense solves."""

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy
from stable_baselines3.common.preprocessing import get_flattened_obs_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn
from torch.func import functional_call

from sb3_grpo.common.kl import distribution_parameters, exact_kl
from sb3_grpo.exact_trpo.actor import (
    actor_parameters,
    closed_form_fisher_problem,
    distribution_inputs,
    fixed_noise,
    make_distribution,
    preprocessed_observations,
)
from sb3_grpo.exact_trpo.fisher import ExactFisher, cudnn_disabled
from sb3_grpo.exact_trpo.solvers import conjugate_gradient, preconditioned_refinement

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


def _sb3_distribution(policy, obs):
    """SB3's own actor head (features extractor, MLP, ``_get_action_dist_from_latent``) on float64 observations."""
    preprocessed = preprocessed_observations(policy, obs)
    return policy._get_action_dist_from_latent(policy.mlp_extractor.forward_actor(policy.pi_features_extractor(preprocessed)))


class _KLHead(nn.Module):
    def __init__(self, policy, old, rows, noise_seed, sb3_head):
        super().__init__()
        self.policy = policy
        self.old = old
        self.rows = rows
        self.noise_seed = noise_seed
        self.sb3_head = sb3_head

    def distribution(self, obs):
        with fixed_noise(self.noise_seed, "cpu"):
            if self.sb3_head:
                return _sb3_distribution(self.policy, obs)
            return make_distribution(self.policy, distribution_inputs(self.policy, obs))

    def forward(self, obs):
        kl = exact_kl(self.old, self.distribution(obs))
        return (kl if self.rows is None else kl[self.rows]).mean()


def _kl_hessian(policy, obs, params, rows=None, noise_seed=None, sb3_head=False):
    """Autograd Hessian of theta -> mean KL(pi_old || pi_theta) at theta_old, over the flat ``params``: the KL at the
    states ``rows`` (all by default) of one forward pass over all of ``obs`` (its noise layers seeded with
    ``noise_seed``), through our :func:`distribution_inputs` or SB3's own head (``sb3_head``)."""
    head = _KLHead(policy, None, rows, noise_seed, sb3_head)
    with th.no_grad():
        head.old = distribution_parameters(head.distribution(obs)).clone()
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
        return functional_call(head, parts, (obs,), strict=False, tie_weights=False)  # see fisher._jacobian_u

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
    parameters = dict(policy.named_parameters())
    fisher = ExactFisher(policy, obs)
    assert fisher.layers is None  # conv layers: per-sample Jacobians
    g = th.randn(fisher.n_params, dtype=th.float64, generator=th.Generator().manual_seed(7))
    x = fisher.solve(g, 0.1, space="samples")  # P is about 70k: only the Woodbury side is affordable
    assert _rel(fisher.matvec(x) + 0.1 * x, g) < 1e-8
    # the policy keeps its own nn.Parameters (torch.func's tied-weight handling replaced the extractor's, reached as
    # both features_extractor and pi_features_extractor, by plain tensors the optimizer does not hold)
    for name, p in policy.named_parameters():
        assert p is parameters[name] and isinstance(p, nn.Parameter), name


def test_actor_parameters_exclude_the_critic():
    policy = _policy("gaussian")
    names = [n for n, _ in actor_parameters(policy, _obs(n=2))]
    assert "log_std" in names and names
    assert not any("value" in n for n in names)


def _gsde_policy(full_std=True, learn_features=False, squash_output=False, use_expln=False, seed=0):
    th.manual_seed(seed)
    policy = ActorCriticPolicy(
        OBS_SPACE,
        ACTION_SPACES["gaussian"],
        lambda _: 1e-3,
        net_arch=[5, 4],
        activation_fn=nn.Tanh,
        use_sde=True,
        log_std_init=-0.3,
        full_std=full_std,
        use_expln=use_expln,
        squash_output=squash_output,
        share_features_extractor=False,
    )
    policy.action_dist.learn_features = learn_features
    with th.no_grad():  # a log_std that differs across its entries
        policy.log_std.add_(0.3 * th.randn(policy.log_std.shape, generator=th.Generator().manual_seed(seed)))
    return policy.to(th.float64)


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(full_std=False),
        dict(learn_features=True),
        dict(full_std=False, learn_features=True),
        dict(squash_output=True),
        dict(use_expln=True),
    ],
    ids=["default", "shared_std", "learn_features", "shared_std_learn_features", "squashed", "expln"],
)
def test_gsde_fisher_equals_kl_hessian(options):
    # gSDE at a state: N(mu, sigma^2) with sigma depending on log_std (and, with learn_features, on the network)
    # through the latent; the Fisher in (mu, sigma) is diag(1/sigma^2, 2/sigma^2). Oracle: the Hessian of the mean KL
    # through SB3's own head (_get_action_dist_from_latent), independent of our distribution_inputs.
    policy, obs = _gsde_policy(**options), _obs(n=6)
    assert closed_form_fisher_problem(policy) is None
    fisher = ExactFisher(policy, obs)
    assert fisher.k == 4 and fisher.layers is None  # (mean, std) per action dimension; log_std outside nn.Linear
    names = [n for n, p in policy.named_parameters() if any(p is q for q in fisher.params)]
    assert "log_std" in names and not any("value" in n for n in names)
    hessian = _kl_hessian(policy, obs, fisher.params, sb3_head=True)
    assert _rel(fisher.matrix(), hessian) < 1e-6
    g = th.randn(fisher.n_params, dtype=th.float64, generator=th.Generator().manual_seed(11))
    dense = hessian + 0.05 * th.eye(fisher.n_params, dtype=th.float64)
    for space in ("samples", "parameters"):
        assert _rel(fisher.solve(g, 0.05, space=space), th.linalg.solve(dense, g)) < 1e-6


class _BatchNormDropoutExtractor(BaseFeaturesExtractor):
    """SB3's test_train_eval_mode.py extractor (flatten, BatchNorm, Dropout), with a Linear layer after it."""

    def __init__(self, observation_space, batch_norm=True, dropout=0.5):
        super().__init__(observation_space, 6)
        n_in = get_flattened_obs_dim(observation_space)
        layers = [nn.Flatten()] + ([nn.BatchNorm1d(n_in)] if batch_norm else []) + [nn.Dropout(dropout)]
        self.net = nn.Sequential(*layers, nn.Linear(n_in, 6), nn.Tanh())

    def forward(self, observations):
        return self.net(observations)


def _train_mode_policy(kind, batch_norm, dropout):
    th.manual_seed(0)
    policy = ActorCriticPolicy(
        OBS_SPACE,
        ACTION_SPACES[kind],
        lambda _: 1e-3,
        net_arch=[5],
        features_extractor_class=_BatchNormDropoutExtractor,
        features_extractor_kwargs=dict(batch_norm=batch_norm, dropout=dropout),
        share_features_extractor=False,
    ).to(th.float64)
    policy.set_training_mode(True)
    return policy


@pytest.mark.parametrize("kind", ["categorical", "gaussian"])
@pytest.mark.parametrize("batch_norm, dropout", [(True, 0.0), (True, 0.5), (False, 0.5)])
def test_train_mode_fisher_is_the_kl_hessian_of_the_whole_batch_forward(kind, batch_norm, dropout):
    # BatchNorm in training mode normalises with the batch's statistics (each state's output depends on the others),
    # Dropout draws masks: the Fisher is the Hessian of the KL of one forward pass over the whole batch, with the same
    # masks (noise_seed). Oracle: autograd's Hessian of that mean KL; on a subset of the states too.
    policy, obs = _train_mode_policy(kind, batch_norm, dropout), _obs(n=8)
    buffers = [b.clone() for b in policy.buffers()]
    fisher = ExactFisher(policy, obs, noise_seed=5)
    assert fisher.structured == (not batch_norm)  # Dropout alone keeps the per-layer factorisation
    hessian = _kl_hessian(policy, obs, fisher.params, noise_seed=5)
    assert _rel(fisher.matrix(), hessian) < 1e-6
    rows = th.tensor([1, 4, 5])
    sub = ExactFisher(policy, obs, params=fisher.params, states=rows, noise_seed=5)
    assert sub.n_states == 3
    sub_hessian = _kl_hessian(policy, obs, fisher.params, rows=rows, noise_seed=5)
    assert _rel(sub.matrix(), sub_hessian) < 1e-6
    assert _rel(fisher.subset(rows).matrix(), sub_hessian) < 1e-6
    g = th.randn(fisher.n_params, dtype=th.float64, generator=th.Generator().manual_seed(12))
    expected = th.linalg.solve(sub_hessian + 0.05 * th.eye(fisher.n_params, dtype=th.float64), g)
    assert _rel(sub.solve(g, 0.05), expected) < 1e-6
    # the batch alone differs from its states in a smaller batch: the rows are not the Fisher of obs[rows]
    if batch_norm:
        assert _rel(ExactFisher(policy, obs[rows], params=fisher.params, noise_seed=5).matrix(), sub_hessian) > 1e-3
    # the running statistics are left as they were (the oracle's forward passes moved them: compare with the copy)
    fresh = _train_mode_policy(kind, batch_norm, dropout)
    ExactFisher(fresh, obs, noise_seed=5).matrix()
    for a, b in zip(fresh.buffers(), buffers, strict=True):
        assert th.equal(a, b)


class _ObsEnvPolicy:
    """Policies on observation spaces SB3 one-hot encodes (Discrete, MultiDiscrete), alone or inside a Dict."""

    @staticmethod
    def make(space):
        th.manual_seed(0)
        cls = MultiInputActorCriticPolicy if isinstance(space, spaces.Dict) else ActorCriticPolicy
        return cls(space, spaces.Discrete(3), lambda _: 1e-3, net_arch=[5], share_features_extractor=False).to(th.float64)


OBS_SPACES = {
    "discrete": spaces.Discrete(4),
    "multidiscrete": spaces.MultiDiscrete([3, 2]),
    "multibinary": spaces.MultiBinary(3),
    "dict": spaces.Dict({"a": spaces.Discrete(4), "b": OBS_SPACE, "c": spaces.MultiDiscrete([3, 2])}),
}


@pytest.mark.parametrize("space", list(OBS_SPACES))
def test_generic_path_on_one_hot_encoded_observations(space):
    # SB3's preprocess_obs one-hot encodes Discrete / MultiDiscrete observations, which vmap cannot batch: the generic
    # (torch.func) path preprocesses outside vmap. Oracle: the KL Hessian (no vmap involved).
    obs_space = OBS_SPACES[space]
    obs_space.seed(0)
    policy = _ObsEnvPolicy.make(obs_space)
    samples = [obs_space.sample() for _ in range(7)]
    if isinstance(obs_space, spaces.Dict):
        obs = {key: th.as_tensor(np.stack([o[key] for o in samples])) for key in obs_space.spaces}
    else:
        obs = th.as_tensor(np.stack(samples))
    generic = ExactFisher(policy, obs, structured=False)
    assert generic.layers is None
    hessian = _kl_hessian(policy, obs, generic.params)
    assert _rel(generic.matrix(), hessian) < 1e-6
    assert _rel(ExactFisher(policy, obs).matrix(), hessian) < 1e-6


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


def test_cudnn_is_off_only_around_the_per_sample_jacobians_on_cuda():
    """cuDNN's RNN kernels cannot run under vmap (#45): the per-sample path switches the flag off on CUDA only and
    restores it, also after an error; other devices leave it alone. (The CUDA run itself is in test_devices.py.)"""
    assert th.backends.cudnn.enabled
    with cudnn_disabled("cpu"):
        assert th.backends.cudnn.enabled
    with cudnn_disabled(th.device("cuda", 0)):
        assert not th.backends.cudnn.enabled
    assert th.backends.cudnn.enabled
    with pytest.raises(RuntimeError, match="inside"), cudnn_disabled("cuda"):
        raise RuntimeError("inside")
    assert th.backends.cudnn.enabled
    th.backends.cudnn.enabled = False  # a setting of the caller's is kept as it was
    try:
        with cudnn_disabled("cuda"):
            assert not th.backends.cudnn.enabled
        assert not th.backends.cudnn.enabled
    finally:
        th.backends.cudnn.enabled = True
