"""ExactTRPO: learning on every action space, determinism, save/load/continue, refusals, logger keys, devices."""

import copy

import numpy as np
import pytest
import torch as th
from envs import TargetEnv
from stable_baselines3.common.distributions import kl_divergence
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure

from sb3_grpo.common.fisher import ExactFisher, actor_parameters, distribution_inputs, make_distribution
from sb3_grpo.common.kl import distribution_parameters
from sb3_grpo.exact_trpo import ExactTRPO

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not th.cuda.is_available(), reason="no CUDA device"))]
SMALL = dict(policy_kwargs=dict(net_arch=[32, 32]))
LOG_KEYS = (
    "train/kl",
    "train/step_size",
    "train/line_search_steps",
    "train/is_line_search_success",
    "train/expected_improvement",
    "train/fisher_solver",
    "train/value_loss",
    "train/explained_variance",
    "train/policy_objective",
    "train/damping",
)


def _target_env(kind, n_envs=4, seed=0):
    return make_vec_env(TargetEnv, n_envs=n_envs, seed=seed, env_kwargs=dict(kind=kind))


def _model(kind="discrete", **kwargs):
    options = dict(n_steps=64, batch_size=64, target_kl=0.05, seed=0, device="cpu", **SMALL)
    options.update(kwargs)
    return ExactTRPO("MlpPolicy", _target_env(kind), **options)


def _params(model):
    return [p.detach().cpu().clone() for p in model.policy.parameters()]


@pytest.mark.parametrize("kind,threshold", [("discrete", 3.5), ("multidiscrete", 3.0), ("multibinary", 2.0), ("box", -3.0)])
def test_learns_the_target_task(kind, threshold):
    # random play: 5/3 (discrete), 5/6 (multidiscrete), 5/8 (multibinary), about -6.7 (box) per episode
    model = _model(kind, n_steps=128, batch_size=128, target_kl=0.1)
    model.learn(5120)
    mean, _ = evaluate_policy(model, _target_env(kind, n_envs=1, seed=123), n_eval_episodes=20)
    assert mean > threshold


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_runs_on_classic_control(env_id):
    model = ExactTRPO("MlpPolicy", make_vec_env(env_id, n_envs=2, seed=0), n_steps=128, seed=0, device="cpu", **SMALL)
    model.learn(512)
    kl = model.logger.name_to_value["train/kl"]
    assert 0 <= kl <= model.target_kl
    assert model.logger.name_to_value["train/fisher_solver"].startswith("exact-")


def test_logger_keys_and_trust_region():
    model = _model()
    model.set_logger(configure(None, []))
    model.learn(256)
    values = model.logger.name_to_value
    for key in LOG_KEYS:
        assert key in values, key
    assert values["train/kl"] <= model.target_kl
    assert values["train/fisher_solver"] == "exact-samples"
    assert values["train/line_search_steps"] >= 1


@pytest.mark.parametrize("solver", ["auto", "cg"])
def test_same_seed_same_parameters(solver):
    # sequentially: SB3 seeds the global RNGs at construction and samples actions from them
    first = _model(fisher_solver=solver, fisher_subsample=100).learn(512)
    second = _model(fisher_solver=solver, fisher_subsample=100).learn(512)
    for a, b in zip(_params(first), _params(second), strict=True):
        assert th.equal(a, b)


def test_save_load_continue(tmp_path):
    model = _model("box", fisher_subsample=0.5, advantage_estimator="td", line_search_accept_ratio=0.1)
    model.learn(256)
    path = tmp_path / "exact_trpo"
    model.save(path)
    loaded = ExactTRPO.load(path, env=_target_env("box"), device="cpu")
    for a, b in zip(_params(model), _params(loaded), strict=True):
        assert th.equal(a, b)
    for name in (
        "fisher_solver",
        "fisher_subsample",
        "fisher_memory_budget",
        "fisher_refine_tol",
        "kl_action_reduction",
        "line_search_accept_ratio",
        "target_kl",
        "cg_damping",
        "n_critic_updates",
        "advantage_estimator",
    ):
        assert getattr(loaded, name) == getattr(model, name), name
    assert type(loaded.rollout_buffer.estimator) is type(model.rollout_buffer.estimator)
    assert loaded._fisher_rng.bit_generator.state == model._fisher_rng.bit_generator.state
    assert loaded.policy.share_features_extractor is False
    loaded.learn(256, reset_num_timesteps=False)
    assert loaded.num_timesteps == 512 and loaded._n_updates == 2 * model._n_updates


def test_cg_fallback_over_memory_budget_and_for_gsde():
    model = _model(fisher_memory_budget=1024)
    model.learn(256)
    assert model.logger.name_to_value["train/fisher_solver"] == "cg"
    sde = _model("box", use_sde=True)
    sde.learn(256)
    assert sde.logger.name_to_value["train/fisher_solver"] == "cg"
    assert sde.logger.name_to_value["train/kl"] <= sde.target_kl


def test_forced_solvers_and_sub_sampling():
    for options in (dict(fisher_solver="exact", fisher_subsample=None), dict(fisher_solver="cg"), dict(sub_sampling_factor=2)):
        model = _model("multidiscrete", **options)
        model.learn(256)
        expected = "cg" if options.get("fisher_solver") == "cg" else "exact-samples"
        assert model.logger.name_to_value["train/fisher_solver"] == expected


def test_subsampled_fisher_is_refined_to_the_whole_batch_solution():
    # oracle: the dense solve of the whole rollout's damped Fisher (ExactFisher.matrix is checked against the KL
    # Hessian in test_fisher.py), in float64
    model = _model("box", fisher_subsample=12, fisher_refine_tol=1e-9, cg_max_steps=500, cg_damping=0.01)
    model.learn(256)
    assert model.logger.name_to_value["train/fisher_refine_steps"] > 0
    assert model.logger.name_to_value["train/fisher_residual"] < 1e-5  # float32 during learn: its rounding floor
    model.policy.to(th.float64)
    obs = next(model.rollout_buffer.get(batch_size=None)).observations.double()
    params = [p for _, p in actor_parameters(model.policy, obs[:2])]
    fisher = ExactFisher(model.policy, obs, params=params)
    g = th.randn(fisher.n_params, dtype=th.float64, generator=th.Generator().manual_seed(0))
    # box: 2 action dimensions, whose KL is averaged (kl_action_reduction="mean"): H = F / 2
    expected = th.linalg.solve(fisher.matrix() / 2 + 0.01 * th.eye(fisher.n_params, dtype=th.float64), g)
    x, info = model._search_direction(obs, params, g)
    assert info["fisher_states"] == 12 and info["fisher_solver"] == "exact-samples"
    assert info["fisher_refine_steps"] > 0 and info["fisher_residual"] <= 1e-9
    assert float((x - expected).norm() / expected.norm()) < 1e-6
    # without refinement: the subsample's own exact solution, which is not the batch's
    model.fisher_refine_tol = None
    x_sub, info = model._search_direction(obs, params, g)
    assert info["fisher_refine_steps"] == 0 and "fisher_residual" not in info
    assert float((x_sub - expected).norm() / expected.norm()) > 1e-3
    # the whole batch in the factorisation: nothing to refine
    model.fisher_refine_tol, model.fisher_subsample = 1e-9, None
    x_all, info = model._search_direction(obs, params, g)
    assert info["fisher_refine_steps"] == 0 and float((x_all - expected).norm() / expected.norm()) < 1e-8


def _flat(tensors):
    return th.cat([t.reshape(-1) for t in tensors])


@pytest.mark.parametrize("kind", ["box", "multibinary", "discrete", "multidiscrete"])
@pytest.mark.parametrize("subsample", [None, 12])
def test_trust_region_is_sb3_contribs(kind, subsample):
    # oracle: sb3-contrib TRPO's own KL measure kl_divergence(pi_theta, pi_old).mean() (a mean over action dimensions
    # too, for Gaussian and Bernoulli policies) and its Hessian-vector product by double backpropagation, in float64
    damping = 0.03
    model = _model(kind, fisher_subsample=subsample, fisher_refine_tol=1e-11, cg_max_steps=400, cg_damping=damping)
    policy = model.policy.to(th.float64)
    obs = th.randn(40, 4, dtype=th.float64, generator=th.Generator().manual_seed(1))
    params = [p for _, p in actor_parameters(policy, obs[:2])]
    with th.no_grad():
        old = copy.copy(make_distribution(policy, distribution_inputs(policy, obs)))
    new = make_distribution(policy, distribution_inputs(policy, obs))
    grad_kl = _flat(th.autograd.grad(kl_divergence(new, old).mean(), params, create_graph=True))

    def hvp(v):
        return _flat(th.autograd.grad(grad_kl @ v, params, retain_graph=True))

    g = th.randn(len(grad_kl), dtype=th.float64, generator=th.Generator().manual_seed(2))
    x, _ = model._search_direction(obs, params, g)
    assert float((hvp(x) + damping * x - g).norm() / g.norm()) < 1e-8
    # the line search's KL(old || new) is sb3-contrib's measure too
    with th.no_grad():
        for p in params:
            p.add_(0.05 * th.randn(p.shape, dtype=th.float64, generator=th.Generator().manual_seed(3)))
        moved = make_distribution(policy, distribution_inputs(policy, obs))
        expected = kl_divergence(old, moved).mean()
        assert abs(float(model._mean_kl(distribution_parameters(old).clone(), moved) - expected)) < 1e-10 * float(expected)
    # "sum": the whole action distribution's KL (the paper's); the same for per-state (categorical) KLs
    model.kl_action_reduction = "sum"
    d = 2 if kind == "box" else 3 if kind == "multibinary" else 1
    with th.no_grad():
        assert abs(float(model._mean_kl(distribution_parameters(old).clone(), moved) - d * expected)) < 1e-9 * float(expected)


def test_refusals():
    with pytest.raises(ValueError, match=r"share_features_extractor=False"):
        _shared_cnn()
    with pytest.raises(ValueError, match="gSDE"):
        _model("box", use_sde=True, fisher_solver="exact")
    with pytest.raises(ValueError, match="fisher_solver"):
        _model(fisher_solver="cholesky")
    with pytest.raises(ValueError, match="cg_damping"):
        _model(cg_damping=0.0)
    with pytest.raises(ValueError, match="fisher_subsample"):
        _model(fisher_subsample=1.5)
    with pytest.raises(ValueError, match="target_kl"):
        _model(target_kl=0.0)
    with pytest.raises(ValueError, match="kl_action_reduction"):
        _model(kl_action_reduction="max")
    with pytest.raises(ValueError, match="fisher_refine_tol"):
        _model(fisher_refine_tol=0.0)
    with pytest.raises(Exception, match=r"nope"):
        _model(advantage_estimator="nope")
    # a parameter-free shared extractor (MlpPolicy's Flatten) is fine
    _model(policy_kwargs=dict(net_arch=[8], share_features_extractor=True))


def _shared_cnn():
    import gymnasium as gym
    from gymnasium import spaces

    class ImageEnv(gym.Env):
        observation_space = spaces.Box(0, 255, (36, 36, 1), dtype=np.uint8)
        action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, True, False, {}

    return ExactTRPO(
        "CnnPolicy", ImageEnv(), n_steps=8, batch_size=8, policy_kwargs=dict(share_features_extractor=True), device="cpu"
    )


@pytest.mark.parametrize("device", DEVICES)
def test_devices(device):
    model = _model("box", device=device)
    model.learn(256)
    assert next(model.policy.parameters()).device.type == device
    assert model.logger.name_to_value["train/fisher_solver"].startswith("exact-")
    assert np.isfinite(model.logger.name_to_value["train/kl"])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("net_arch, space", [([4], "parameters"), ([64, 64], "samples")])
def test_the_exact_solve_runs_on_the_policy_device(device, net_arch, space, monkeypatch):
    """Every Cholesky factorisation of the Fisher system (either space) runs on the policy's device, not on the CPU."""
    from sb3_grpo.common import fisher as fisher_module

    factorised_on = []
    cholesky = fisher_module._cholesky

    def spy(mat):
        factorised_on.append(mat.device.type)
        return cholesky(mat)

    monkeypatch.setattr(fisher_module, "_cholesky", spy)
    model = _model("box", device=device, policy_kwargs=dict(net_arch=net_arch))
    model.learn(512)
    assert model.logger.name_to_value["train/fisher_solver"] == f"exact-{space}"
    assert factorised_on == [device, device]  # one factorisation per update, two updates


@pytest.mark.slow
def test_cartpole_is_solved():
    model = ExactTRPO(
        "MlpPolicy",
        make_vec_env("CartPole-v1", n_envs=2, seed=0),
        n_steps=512,
        batch_size=512,
        cg_damping=1e-3,
        gae_lambda=0.98,
        n_critic_updates=20,
        seed=0,
        device="cpu",
    )
    model.learn(100_000)
    mean, _ = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=99), n_eval_episodes=10)
    assert mean >= 475
