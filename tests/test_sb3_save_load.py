"""SB3 conformance: saving and loading (SB3 ``tests/test_save_load.py``, contrib ``tests/test_save_load.py``)."""

import tempfile
import warnings
from collections import OrderedDict
from copy import deepcopy

import numpy as np
import pytest
import torch as th
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params, check_timesteps
from stable_baselines3 import PPO
from stable_baselines3.common.envs import FakeImageEnv, IdentityEnvBox
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, get_device
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_grpo import GRPO, REINFORCE, AdaptiveKLPPO, ExactTRPO

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not th.cuda.is_available(), reason="CUDA not available")),
    "auto",
]


def select_env() -> IdentityEnvBox:
    return IdentityEnvBox(-10, 10)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("device", DEVICES)
def test_save_load(tmp_path, model_class, device):
    """get/set_parameters and their errors, save, load on ``device``: same parameters, same deterministic actions,
    training goes on."""
    env = DummyVecEnv([select_env])
    model = model_class(
        "MlpPolicy",
        env,
        policy_kwargs=dict(net_arch=[16]),
        learning_rate=1e-3,
        verbose=1,
        **algo_kwargs(model_class, reproducible_reset=False),
    )
    model.learn(total_timesteps=128)

    env.reset()
    observations = np.concatenate([env.step([env.action_space.sample()])[0] for _ in range(10)], axis=0)

    original_params = deepcopy(model.get_parameters())

    # invalid object names are refused
    invalid_object_params = deepcopy(original_params)
    invalid_object_params["I_should_not_be_a_valid_object"] = "and_I_am_an_invalid_tensor"
    with pytest.raises(ValueError):
        model.set_parameters(invalid_object_params, exact_match=True)
    with pytest.raises(ValueError):
        model.set_parameters(invalid_object_params, exact_match=False)

    # exact_match catches a missing object ...
    missing_object_params = dict(list(original_params.items())[:-1])
    with pytest.raises(ValueError):
        model.set_parameters(missing_object_params, exact_match=True)
    # ... and a missing tensor inside a state dict
    missing_tensor_params = {name: OrderedDict(list(params.items())[:-1]) for name, params in original_params.items()}
    with pytest.raises(RuntimeError):
        model.set_parameters(missing_tensor_params, exact_match=True)

    # parameters do change (all but the last one of each state dict)
    random_params = {}
    for object_name, params in original_params.items():
        if "optim" in object_name:
            random_params[object_name] = params
        else:
            random_params[object_name] = OrderedDict((k, th.rand_like(v)) for k, v in list(params.items())[:-1])
    model.set_parameters(random_params, exact_match=False)
    new_params = model.get_parameters()
    for object_name in original_params:
        if "optim" in object_name:
            continue
        last_key = list(original_params[object_name].keys())[-1]
        for k in original_params[object_name]:
            same = th.allclose(original_params[object_name][k], new_params[object_name][k])
            assert same if k == last_key else not same, (object_name, k)
    params = new_params

    selected_actions, _ = model.predict(observations, deterministic=True)
    model.save(tmp_path / "test_save.zip")
    del model

    model = model_class.load(str(tmp_path / "test_save.zip"), env=env, device=device)
    assert model.device.type == get_device(device).type
    assert model.policy.device.type == get_device(device).type
    new_params = model.get_parameters()
    for object_name in new_params:
        if "optim" in object_name:
            continue
        for key in params[object_name]:
            assert new_params[object_name][key].device.type == get_device(device).type
            assert th.allclose(params[object_name][key].to("cpu"), new_params[object_name][key].to("cpu")), key
    new_selected_actions, _ = model.predict(observations, deterministic=True)
    assert np.allclose(selected_actions, new_selected_actions, 1e-4)
    model.learn(total_timesteps=128)


@algo_params(ALL_ALGOS)
def test_save_load_compiled_policy(tmp_path, model_class):
    """A model whose policy went through ``th.compile`` saves and loads (SB3 GH#2137)."""
    model = model_class("MlpPolicy", select_env(), policy_kwargs=dict(net_arch=[16]), **algo_kwargs(model_class))
    model.save(tmp_path / "test_save.zip")
    model = model_class.load(tmp_path / "test_save.zip")
    model.policy = th.compile(model.policy)
    model.save(tmp_path / "test_save.zip")
    model_class.load(tmp_path / "test_save.zip")


@algo_params(ALL_ALGOS)
def test_set_env(tmp_path, model_class):
    """set_env keeps or resets the last observation as asked, refuses another number of envs, and load(env=...)
    keeps the step count."""
    env = DummyVecEnv([select_env])
    env2 = DummyVecEnv([select_env])
    env3 = select_env()
    env4 = DummyVecEnv([select_env for _ in range(2)])
    kwargs = algo_kwargs(model_class, reproducible_reset=False)

    model = model_class("MlpPolicy", env, policy_kwargs=dict(net_arch=[16]), **kwargs)
    model.learn(total_timesteps=64)

    model.set_env(env2, force_reset=True)
    assert model._last_obs is None
    model.learn(total_timesteps=64, reset_num_timesteps=True)
    check_timesteps(model_class, model.num_timesteps, 64)

    model.set_env(env3)  # a gym.Env is wrapped
    model.learn(total_timesteps=64)

    with pytest.raises(AssertionError):
        model.set_env(env4)  # the number of envs must stay the same

    model.set_env(model.get_env(), force_reset=False)
    assert model._last_obs is not None
    steps = model.num_timesteps
    model.learn(total_timesteps=64, reset_num_timesteps=False)
    check_timesteps(model_class, model.num_timesteps, steps + 64)

    current_env = model.get_env()
    model.save(tmp_path / "test_save.zip")
    del model
    steps_saved = steps = model_class.load(tmp_path / "test_save.zip").num_timesteps

    model = model_class.load(tmp_path / "test_save.zip", env=current_env, force_reset=False)
    assert model._last_obs is not None
    model.learn(total_timesteps=64, reset_num_timesteps=False)
    check_timesteps(model_class, model.num_timesteps, steps + 64)

    model = model_class.load(tmp_path / "test_save.zip", env=env3, force_reset=True)
    assert model._last_obs is None
    model.learn(total_timesteps=64, reset_num_timesteps=False)
    check_timesteps(model_class, model.num_timesteps, steps_saved + 64)

    # another number of envs at load time
    model = model_class.load(tmp_path / "test_save.zip", env=env4)
    model.learn(total_timesteps=64)


@algo_params(ALL_ALGOS)
def test_exclude_include_saved_params(tmp_path, model_class):
    model = model_class("MlpPolicy", select_env(), policy_kwargs=dict(net_arch=[16]), verbose=2, **algo_kwargs(model_class))
    model.save(tmp_path / "test_save", exclude=["verbose"])
    model = model_class.load(str(tmp_path / "test_save.zip"))
    assert model.verbose != 2

    model.verbose = 2
    model.save(tmp_path / "test_save", exclude=["verbose"], include=["verbose"])
    custom_objects = dict(learning_rate=2e-5, dummy=1.0)
    model = model_class.load(str(tmp_path / "test_save.zip"), custom_objects=custom_objects, print_system_info=True)
    assert model.verbose == 2
    assert model.learning_rate == custom_objects["learning_rate"]
    assert not hasattr(model, "dummy")


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("policy_str", ["MlpPolicy", "CnnPolicy"])
@pytest.mark.parametrize("use_sde", [False, True])
def test_save_load_policy(tmp_path, model_class, policy_str, use_sde):
    """The policy alone saves and loads (``policy.save`` / ``PolicyClass.load``) and predicts the same actions."""
    kwargs = algo_kwargs(model_class, reproducible_reset=False, learning_rate=1e-3)
    policy_kwargs = dict(net_arch=[16])
    if policy_str == "MlpPolicy":
        env = select_env()
    else:
        env = FakeImageEnv(screen_height=40, screen_width=40, n_channels=2, discrete=False)
        policy_kwargs["features_extractor_kwargs"] = dict(features_dim=16)
    env = DummyVecEnv([lambda: env])

    model = model_class(policy_str, env, policy_kwargs=policy_kwargs, use_sde=use_sde, verbose=1, **kwargs)
    model.learn(total_timesteps=128)

    env.reset()
    observations = np.concatenate([env.step([env.action_space.sample()])[0] for _ in range(10)], axis=0)

    policy = model.policy
    policy_class = policy.__class__
    params = deepcopy(policy.state_dict())
    policy.load_state_dict({name: th.rand_like(param) for name, param in params.items()})
    new_params = policy.state_dict()
    for k in params:
        assert not th.allclose(params[k], new_params[k]), k
    params = new_params

    selected_actions, _ = policy.predict(observations, deterministic=True)
    policy.save(tmp_path / "policy.pkl")
    del policy

    policy = policy_class.load(tmp_path / "policy.pkl")
    new_params = policy.state_dict()
    for key in params:
        assert th.allclose(params[key], new_params[key]), key
    new_selected_actions, _ = policy.predict(observations, deterministic=True)
    assert np.allclose(selected_actions, new_selected_actions, 1e-4)


@algo_params(ALL_ALGOS)
def test_save_load_env_cnn(tmp_path, model_class):
    """Loading with an env that needs a CnnPolicy (VecTransposeImage wrapping, observation space check)."""
    env = FakeImageEnv(screen_height=40, screen_width=40, n_channels=2, discrete=False)
    kwargs = dict(policy_kwargs=dict(net_arch=[32], features_extractor_kwargs=dict(features_dim=16)))
    kwargs.update(algo_kwargs(model_class, reproducible_reset=False))
    model = model_class("CnnPolicy", env, **kwargs).learn(100)
    model.save(tmp_path / "test_save")
    model_class.load(str(tmp_path / "test_save.zip"), env=env, **kwargs).learn(100)


@algo_params([PPO, GRPO, AdaptiveKLPPO])
def test_save_load_lambda_schedules(tmp_path, model_class):
    """Lambdas as learning rate and clip range survive a save (SB3 GH#2115)."""
    env = DummyVecEnv([select_env])
    model = model_class(
        "MlpPolicy",
        env,
        learning_rate=lambda _: 0.001,
        clip_range=lambda _: 0.3,
        **algo_kwargs(model_class, reproducible_reset=False),
    )
    model.learn(total_timesteps=100)
    model.save(tmp_path / "test_schedule_safe.zip")
    model = model_class.load(tmp_path / "test_schedule_safe.zip", env=env)
    assert model.learning_rate(0) == 0.001
    assert model.learning_rate.__name__ == "<lambda>"
    assert isinstance(model.clip_range, FloatSchedule)
    assert model.clip_range.value_schedule(0) == 0.3
    model.learn(total_timesteps=100)


@algo_params([PPO, GRPO, AdaptiveKLPPO])
def test_save_load_clip_range_portable(tmp_path, model_class):
    """A constant clip range is a ConstantSchedule, not a lambda, before and after a save (SB3 GH#2115)."""
    env = DummyVecEnv([select_env])
    model = model_class("MlpPolicy", env, clip_range=0.2, **algo_kwargs(model_class, reproducible_reset=False))
    model.learn(total_timesteps=64)
    for _ in range(2):
        assert isinstance(model.clip_range, FloatSchedule)
        assert isinstance(model.clip_range.value_schedule, ConstantSchedule)
        assert model.clip_range.value_schedule.val == 0.2
        model.save(tmp_path / "test_schedule_safe.zip")
        model = model_class.load(tmp_path / "test_schedule_safe.zip", env=env)


@algo_params(ALL_ALGOS)
def test_cast_lr_schedule(tmp_path, model_class):
    """The learning rate schedule returns a Python float, before and after a save (SB3 GH#1900)."""
    model = model_class("MlpPolicy", "Pendulum-v1", learning_rate=lambda t: t * np.sin(1.0), **algo_kwargs(model_class))
    assert type(model.lr_schedule(1.0)) is float
    assert np.allclose(model.lr_schedule(0.5), 0.5 * np.sin(1.0))
    model.save(tmp_path / "model.zip")
    model = model_class.load(tmp_path / "model.zip")
    assert type(model.lr_schedule(1.0)) is float
    assert np.allclose(model.lr_schedule(0.5), 0.5 * np.sin(1.0))


@algo_params(ALL_ALGOS)
def test_save_load_net_arch_none(tmp_path, model_class):
    """``net_arch=None`` is replaced by the default architecture and survives a save (SB3 GH#1928)."""
    model_class("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=None), **algo_kwargs(model_class)).save(
        tmp_path / "model.zip"
    )
    model = model_class.load(tmp_path / "model.zip")
    assert model.policy.net_arch is not None


@algo_params(ALL_ALGOS)
@pytest.mark.filterwarnings("error")
def test_no_resource_warning(tmp_path, model_class):
    """Files opened by save/load are closed; a file object passed in stays open (SB3 GH#1751)."""
    kwargs = algo_kwargs(model_class, device="cpu")
    model_class("MlpPolicy", "CartPole-v1", **kwargs).save(tmp_path / "model")
    model_class.load(tmp_path / "model", device="cpu")
    model_class("MlpPolicy", "CartPole-v1", **kwargs).save(str(tmp_path / "model"))
    model_class.load(str(tmp_path / "model"), device="cpu")
    with tempfile.TemporaryFile() as fp:
        model_class("MlpPolicy", "CartPole-v1", **kwargs).save(fp)
        fp.seek(0)
        model_class.load(fp, device="cpu")
        assert not fp.closed


@algo_params([ExactTRPO, AdaptiveKLPPO, GRPO, REINFORCE])
def test_load_restores_hyperparameters(tmp_path, model_class):
    """Loading a model with its own class restores its own hyperparameters (not the reference's defaults)."""
    kwargs = algo_kwargs(model_class, seed=3, gamma=0.9)
    model = model_class("MlpPolicy", "CartPole-v1", **kwargs)
    model.save(tmp_path / "model.zip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = model_class.load(tmp_path / "model.zip")
    assert type(loaded) is model_class
    assert loaded.gamma == 0.9
    assert loaded.n_steps == kwargs["n_steps"]
    assert loaded.seed == 3
