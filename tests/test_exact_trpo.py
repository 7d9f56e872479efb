"""ExactTRPO: learning on every action space, determinism, save/load/continue, refusals, logger keys, devices."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from envs import TargetEnv
from gymnasium import spaces
from stable_baselines3.common.distributions import kl_divergence
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure
from stable_baselines3.common.preprocessing import get_flattened_obs_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
from torch import nn

from sb3_grpo.common.kl import distribution_parameters
from sb3_grpo.exact_trpo import ExactTRPO, exact_trpo
from sb3_grpo.exact_trpo.actor import actor_parameters
from sb3_grpo.exact_trpo.fisher import ExactFisher
from sb3_grpo.exact_trpo.policy_step import fisher_states, kl_hessian_matvec, mean_kl, policy_distribution, search_direction

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


def _search_direction(model, obs, params, g):
    return search_direction(model.policy, model._step_settings(), model._fisher_rng, obs, params, g)


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
    assert "train/kl_divergence_loss" not in values  # the KL of the accepted step is logged once, as train/kl
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
    model = _model("box", fisher_subsample=0.5, advantage_estimator="td")
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


def test_cg_fallback_over_memory_budget():
    model = _model(fisher_memory_budget=1024)
    model.learn(256)
    assert model.logger.name_to_value["train/fisher_solver"] == "cg"


@pytest.mark.parametrize("solver", ["exact", "cg"])
@pytest.mark.parametrize("squash_output", [False, True])
def test_gsde_runs_with_either_solver(solver, squash_output):
    sde = _model("box", use_sde=True, fisher_solver=solver, policy_kwargs=dict(net_arch=[16], squash_output=squash_output))
    sde.learn(256)
    assert sde.logger.name_to_value["train/fisher_solver"].startswith("exact-" if solver == "exact" else "cg")
    assert 0 < sde.logger.name_to_value["train/kl"] <= sde.target_kl


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
    x, info = _search_direction(model, obs, params, g)
    assert info["fisher_states"] == 12 and info["fisher_solver"] == "exact-samples"
    assert info["fisher_refine_steps"] > 0 and info["fisher_residual"] <= 1e-9
    assert float((x - expected).norm() / expected.norm()) < 1e-6
    # without refinement: the subsample's own exact solution, which is not the batch's
    model.fisher_refine_tol = None
    x_sub, info = _search_direction(model, obs, params, g)
    assert info["fisher_refine_steps"] == 0 and "fisher_residual" not in info
    assert float((x_sub - expected).norm() / expected.norm()) > 1e-3
    # the whole batch in the factorisation: nothing to refine
    model.fisher_refine_tol, model.fisher_subsample = 1e-9, None
    x_all, info = _search_direction(model, obs, params, g)
    assert info["fisher_refine_steps"] == 0 and float((x_all - expected).norm() / expected.norm()) < 1e-8


def _flat(tensors):
    return th.cat([t.reshape(-1) for t in tensors])


def _sb3_distribution(policy, obs):
    """SB3's own actor head on float64 observations (an MlpPolicy's extractor only flattens them)."""
    return policy._get_action_dist_from_latent(policy.mlp_extractor.forward_actor(policy.pi_features_extractor(obs)))


@pytest.mark.parametrize("kind", ["box", "multibinary", "discrete", "multidiscrete", "box_sde"])
@pytest.mark.parametrize("subsample", [None, 12])
def test_trust_region_is_sb3_contribs(kind, subsample):
    # oracle: sb3-contrib TRPO's own KL measure kl_divergence(pi_theta, pi_old).mean() (a mean over action dimensions
    # too, for Gaussian, gSDE and Bernoulli policies) on SB3's own distributions, and its Hessian-vector product by
    # double backpropagation, in float64
    damping = 0.03
    options = dict(fisher_subsample=subsample, fisher_refine_tol=1e-11, cg_max_steps=400, cg_damping=damping)
    if kind == "box_sde":
        options.update(use_sde=True, policy_kwargs=dict(net_arch=[16], log_std_init=-0.5))
    model = _model(kind.replace("_sde", ""), **options)
    policy = model.policy.to(th.float64)
    obs = th.randn(40, 4, dtype=th.float64, generator=th.Generator().manual_seed(1))
    params = [p for _, p in actor_parameters(policy, obs[:2])]
    with th.no_grad():
        old = copy.copy(_sb3_distribution(policy, obs))
    new = _sb3_distribution(policy, obs)
    grad_kl = _flat(th.autograd.grad(kl_divergence(new, old).mean(), params, create_graph=True))

    def hvp(v):
        return _flat(th.autograd.grad(grad_kl @ v, params, retain_graph=True))

    g = th.randn(len(grad_kl), dtype=th.float64, generator=th.Generator().manual_seed(2))
    x, _ = _search_direction(model, obs, params, g)
    assert float((hvp(x) + damping * x - g).norm() / g.norm()) < 1e-8
    # the line search's KL(old || new) is sb3-contrib's measure too
    with th.no_grad():
        for p in params:
            p.add_(0.05 * th.randn(p.shape, dtype=th.float64, generator=th.Generator().manual_seed(3)))
        moved = copy.copy(_sb3_distribution(policy, obs))
        expected = kl_divergence(old, moved).mean()
        measured = mean_kl(model.policy, model._step_settings(), distribution_parameters(old).clone(), moved)
        assert abs(float(measured - expected)) < 1e-10 * float(expected)
    # "sum": the whole action distribution's KL (the paper's); the same for per-state (categorical) KLs
    model.kl_action_reduction = "sum"
    d = 2 if kind.startswith("box") else 3 if kind == "multibinary" else 1
    with th.no_grad():
        measured = mean_kl(model.policy, model._step_settings(), distribution_parameters(old).clone(), moved)
        assert abs(float(measured - d * expected)) < 1e-9 * float(expected)


def test_refusals():
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
    from sb3_grpo.exact_trpo import fisher as fisher_module

    factorised_on = []
    cholesky = fisher_module.cholesky

    def spy(mat):
        factorised_on.append(mat.device.type)
        return cholesky(mat)

    monkeypatch.setattr(fisher_module, "cholesky", spy)
    model = _model("box", device=device, policy_kwargs=dict(net_arch=net_arch))
    model.learn(512)
    assert model.logger.name_to_value["train/fisher_solver"] == f"exact-{space}"
    assert factorised_on == [device, device]  # one factorisation per update, two updates


class SpaceEnv(gym.Env):
    """Random observations from ``observation_space``, reward 1 for action 0, episodes of 4 steps."""

    def __init__(self, observation_space, action_space=None):
        self.observation_space = observation_space
        self.action_space = action_space or spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(np.all(np.asarray(action) == 0)), self.t >= 4, False, {}


class LayerNormExtractor(BaseFeaturesExtractor):
    """Flatten, Linear, LayerNorm: a parameter outside nn.Linear, so the Fisher takes the generic (torch.func) path."""

    def __init__(self, observation_space):
        super().__init__(observation_space, 8)
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(get_flattened_obs_dim(observation_space), 8), nn.LayerNorm(8))

    def forward(self, observations):
        return self.net(observations)


DICT_IMAGE_SPACE = spaces.Dict(
    {
        "image": spaces.Box(0, 255, (36, 36, 1), dtype=np.uint8),
        "position": spaces.Discrete(5),
        "grid": spaces.MultiDiscrete([3, 2]),
        "vector": spaces.Box(-1.0, 1.0, (2,), dtype=np.float32),
    }
)


@pytest.mark.parametrize(
    "obs_space",
    [spaces.Discrete(4), spaces.MultiDiscrete([3, 4]), spaces.MultiBinary(3), DICT_IMAGE_SPACE],
    ids=["discrete", "multidiscrete", "multibinary", "dict_image"],
)
def test_one_hot_encoded_observations_on_the_generic_path(obs_space):
    # SB3 one-hot encodes Discrete / MultiDiscrete observations (alone or inside a Dict), which torch.func's vmap
    # cannot batch: the actor's Jacobians (a CNN, a LayerNorm) were refused with a vmap error; also under VecNormalize
    env = DummyVecEnv([lambda: SpaceEnv(obs_space)])
    if isinstance(obs_space, spaces.Dict):
        env, policy, policy_kwargs = VecNormalize(env, norm_obs_keys=["vector"]), "MultiInputPolicy", dict(net_arch=[8])
        policy_kwargs["features_extractor_kwargs"] = dict(cnn_output_dim=8)
    else:
        policy, policy_kwargs = "MlpPolicy", dict(net_arch=[8], features_extractor_class=LayerNormExtractor)
    model = ExactTRPO(policy, env, n_steps=16, batch_size=16, policy_kwargs=policy_kwargs, seed=0, device="cpu")
    model.learn(32)
    obs = next(model.rollout_buffer.get(batch_size=None)).observations
    assert not ExactFisher(model.policy, obs).structured
    assert model.logger.name_to_value["train/fisher_solver"].startswith("exact-")
    assert 0 < model.logger.name_to_value["train/kl"] <= model.target_kl


def test_shared_features_extractor_has_sb3_contribs_meaning(monkeypatch):
    # CnnPolicy with share_features_extractor=True (sb3-contrib TRPO's default, refused before): the shared CNN is part
    # of the actor (sb3-contrib's actor parameters: every parameter without "value" in its name that the KL depends
    # on), moved by the natural-gradient step only; the critic's regression leaves it (sb3-contrib clears the actor
    # parameters' gradients) and trains the critic's own layers
    env = FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True)
    policy_kwargs = dict(share_features_extractor=True, features_extractor_kwargs=dict(features_dim=16))
    model = ExactTRPO("CnnPolicy", env, n_steps=32, batch_size=16, policy_kwargs=policy_kwargs, seed=0, device="cpu")
    policy = model.policy
    assert policy.pi_features_extractor is policy.vf_features_extractor
    obs = th.as_tensor(np.concatenate([model.get_env().reset()] * 2)).to(model.device)  # channel-first (SB3 transposes)
    actor = {name for name, _ in actor_parameters(policy, obs)}
    assert actor == {name for name, _ in policy.named_parameters() if "value" not in name}
    assert any(name.startswith("features_extractor.") for name in actor)

    snapshots = {}
    policy_step = exact_trpo.policy_step

    def spy(*args):
        snapshots["before"] = {n: p.detach().clone() for n, p in policy.named_parameters()}
        stats = policy_step(*args)
        snapshots["after_policy_step"] = {n: p.detach().clone() for n, p in policy.named_parameters()}
        return stats

    monkeypatch.setattr(exact_trpo, "policy_step", spy)
    model.learn(32)
    assert model.logger.name_to_value["train/is_line_search_success"] == 1.0
    assert 0 < model.logger.name_to_value["train/kl"] <= model.target_kl
    before, stepped = snapshots["before"], snapshots["after_policy_step"]
    final = {n: p.detach() for n, p in policy.named_parameters()}
    for name in final:
        if name in actor:  # moved by the natural-gradient step (some of them), not by the critic
            assert th.equal(final[name], stepped[name]), name
        else:  # the critic's own layers: untouched by the policy step, trained by the regression
            assert th.equal(stepped[name], before[name]) and not th.equal(final[name], stepped[name]), name
    assert not th.equal(stepped["features_extractor.linear.0.weight"], before["features_extractor.linear.0.weight"])


class FlattenBatchNormDropoutExtractor(BaseFeaturesExtractor):
    """SB3's tests/test_train_eval_mode.py extractor: flatten, BatchNorm, Dropout."""

    def __init__(self, observation_space):
        super().__init__(observation_space, get_flattened_obs_dim(observation_space))
        self.flatten = nn.Flatten()
        self.batch_norm = nn.BatchNorm1d(self._features_dim)
        self.dropout = nn.Dropout(0.5)

    def forward(self, observations):
        return self.dropout(self.batch_norm(self.flatten(observations)))


def _batch_norm_model(env_id, **kwargs):
    policy_kwargs = dict(net_arch=[16, 16], features_extractor_class=FlattenBatchNormDropoutExtractor)
    options = dict(n_steps=64, batch_size=32, policy_kwargs=policy_kwargs, seed=1, device="cpu")
    return ExactTRPO("MlpPolicy", env_id, **options, **kwargs)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_train_and_predict_with_batch_norm_and_dropout(env_id):
    # SB3's test_train_eval_mode.py contract (A2C / PPO): training moves the BatchNorm's parameters and running
    # statistics; predicting (eval mode) is deterministic and leaves them. Here the running statistics take one
    # update per policy step (the policy step's own forward passes leave them).
    model = _batch_norm_model(env_id)
    batch_norm = model.policy.features_extractor.batch_norm
    bias, running_mean = batch_norm.bias.clone(), batch_norm.running_mean.clone()
    model.learn(192)
    assert model.logger.name_to_value["train/fisher_solver"].startswith("exact-")
    assert 0 < model.logger.name_to_value["train/kl"] <= model.target_kl
    assert not th.isclose(bias, batch_norm.bias).all()
    assert not th.isclose(running_mean, batch_norm.running_mean).all()
    assert int(batch_norm.num_batches_tracked) == model._n_updates == 3
    stats = [b.clone() for b in model.policy.buffers()]
    obs = model.get_env().reset()
    first, _ = model.predict(obs, deterministic=True)
    for _ in range(5):
        np.testing.assert_allclose(model.predict(obs, deterministic=True)[0], first)
    for a, b in zip(model.policy.buffers(), stats, strict=True):
        assert th.equal(a, b)


def _fisher_states(model, n, k):
    return fisher_states(model.policy, model._step_settings(), model._fisher_rng, n, k, exact=True)


def test_auto_fisher_subsample_bounds_the_whole_batch_backward_work():
    # each Fisher direction of a BatchNorm actor is a backward pass over the whole batch: "auto" keeps
    # directions x batch states <= 2**19 (256 directions for 2048 states), the refinement does the rest
    assert len(_fisher_states(_batch_norm_model("CartPole-v1"), 2048, 1)) == 256
    assert len(_fisher_states(_batch_norm_model("CartPole-v1"), 4096, 2)) == 64
    assert len(_fisher_states(_model("discrete"), 2048, 1)) == 1536
    # Dropout beside nn.Linear layers only keeps the per-layer factorisation, and the usual number
    dropout = dict(net_arch=[8], features_extractor_class=LinearDropoutExtractor)
    assert len(_fisher_states(_model("discrete", policy_kwargs=dropout), 2048, 1)) == 1536


class LinearDropoutExtractor(BaseFeaturesExtractor):
    def __init__(self, observation_space):
        super().__init__(observation_space, 8)
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(get_flattened_obs_dim(observation_space), 8), nn.Dropout(0.2))

    def forward(self, observations):
        return self.net(observations)


def test_batch_norm_and_dropout_fisher_is_the_hessian_of_the_line_searchs_kl():
    # The direction solves (H + damping I) x = g with H the Hessian of the KL of the forward pass the line search
    # runs: whole-batch BatchNorm statistics and the update's Dropout masks (oracle: ExactTRPO's double-backprop
    # Hessian-vector product of that KL). Other masks give another Hessian.
    model = _batch_norm_model("CartPole-v1", fisher_subsample=None, cg_damping=0.01)
    model.learn(64)
    policy = model.policy
    policy.set_training_mode(True)
    obs = next(model.rollout_buffer.get(batch_size=None)).observations
    params = [p for _, p in actor_parameters(policy, obs[:2])]
    g = th.randn(sum(p.numel() for p in params), generator=th.Generator().manual_seed(0))
    model._noise_seed = 7
    settings = model._step_settings()
    first = policy_distribution(model.policy, settings, obs).distribution.logits
    assert th.equal(policy_distribution(model.policy, settings, obs).distribution.logits, first)  # the same masks each time
    x, info = _search_direction(model, obs, params, g)
    assert info["fisher_solver"].startswith("exact-")
    hvp = kl_hessian_matvec(model.policy, model._step_settings(), obs, params)
    assert float((hvp(x) + 0.01 * x - g).norm() / g.norm()) < 1e-4  # float32
    model._noise_seed = 8
    other = kl_hessian_matvec(model.policy, model._step_settings(), obs, params)
    assert float((other(x) + 0.01 * x - g).norm() / g.norm()) > 1e-2


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
