"""SB3 conformance: smoke runs (SB3 ``tests/test_run.py``, ``test_predict.py::test_auto_wrap``, contrib
``tests/test_run.py::test_trpo``), and GRPO's check of reproducible group starts on SB3's test envs."""

import inspect

import gymnasium as gym
import numpy as np
import pytest
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params, check_timesteps
from sb3_contrib import TRPO
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import IdentityEnvBox

from sb3_grpo import GRPO, REINFORCE, AdaptiveKLPPO, ExactTRPO
from sb3_grpo.grpo import NonReproducibleResetError


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_run(model_class, env_id):
    model = model_class("MlpPolicy", env_id, seed=0, policy_kwargs=dict(net_arch=[16]), verbose=1, **algo_kwargs(model_class))
    model.learn(total_timesteps=128)
    check_timesteps(model_class, model.num_timesteps, 128)


@algo_params(ALL_ALGOS)
def test_auto_wrap(model_class):
    """A plain gym.Env is wrapped into a VecEnv."""
    model = model_class("MlpPolicy", gym.make("Pendulum-v1"), **algo_kwargs(model_class))
    model.learn(100)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("n_envs", [2, 3])
def test_multi_env(model_class, n_envs):
    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=0)
    model = model_class(
        "MlpPolicy", env, policy_kwargs=dict(net_arch=[16]), **algo_kwargs(model_class, n_steps=32, batch_size=32)
    )
    model.learn(2 * 32 * n_envs)
    check_timesteps(model_class, model.num_timesteps, 2 * 32 * n_envs)


@algo_params([PPO, ExactTRPO, AdaptiveKLPPO, REINFORCE])
@pytest.mark.parametrize("normalize_advantage", [False, True])
def test_advantage_normalization(model_class, normalize_advantage):
    model = model_class("MlpPolicy", "CartPole-v1", normalize_advantage=normalize_advantage, **algo_kwargs(model_class))
    model.learn(64)


@algo_params(ALL_ALGOS)
def test_learn_again_keeps_counting(model_class):
    """``learn(reset_num_timesteps=False)`` goes on counting; ``True`` starts again from 0."""
    model = model_class("MlpPolicy", "CartPole-v1", seed=0, **algo_kwargs(model_class))
    model.learn(64)
    first = model.num_timesteps
    model.learn(64, reset_num_timesteps=False)
    check_timesteps(model_class, model.num_timesteps, first + 64)
    model.learn(64, reset_num_timesteps=True)
    check_timesteps(model_class, model.num_timesteps, 64)
    assert model.logger is not None


@algo_params(ALL_ALGOS)
def test_trained_policy_changes(model_class):
    """One ``learn`` call moves the policy's parameters (a run that trains nothing would pass every smoke test)."""
    model = model_class("MlpPolicy", "Pendulum-v1", seed=0, policy_kwargs=dict(net_arch=[16]), **algo_kwargs(model_class))
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    model.learn(128)
    after = model.policy.state_dict()
    assert any(not (before[k] == after[k]).all() for k in before if "action_net" in k or "mlp_extractor.policy" in k)


def test_grpo_non_reproducible_reset_raises_and_says_how_to_fix():
    """SB3's ``IdentityEnvBox`` draws its states from ``action_space.sample()``, which ``reset(seed)`` does not seed:
    the members of a GRPO group start from different states. GRPO refuses, says how to fix the env (seed
    ``np_random`` and the spaces it samples from with the reset seed) and how to opt out."""
    model = GRPO("MlpPolicy", IdentityEnvBox(), **algo_kwargs(GRPO))
    with pytest.raises(NonReproducibleResetError) as error:
        model.learn(128)
    message = str(error.value)
    assert "reset(seed" in message
    # how to fix the env: seed what it samples from (np_random, the spaces) with the reset seed
    assert "np_random" in message
    assert "space" in message
    assert "verify_group_starts=False" in message  # the documented escape
    # ... and the escape trains on the same env
    GRPO("MlpPolicy", IdentityEnvBox(), **algo_kwargs(GRPO, reproducible_reset=False)).learn(128)


@algo_params(ALL_ALGOS)
def test_logger_records(tmp_path, model_class):
    """A custom logger (``set_logger``) gets SB3's keys every iteration: time/, rollout/ep_rew_mean and train/."""
    import csv

    from stable_baselines3.common.logger import configure

    env = gym.make("CartPole-v1", max_episode_steps=20)
    model = model_class("MlpPolicy", env, seed=0, **algo_kwargs(model_class))
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(128, log_interval=1)
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 2
    keys = set(rows[-1])
    assert {"time/fps", "time/iterations", "time/total_timesteps", "rollout/ep_rew_mean", "rollout/ep_len_mean"} <= keys
    assert any(key.startswith("train/") for key in keys)
    assert float(rows[-1]["time/total_timesteps"]) == model.num_timesteps
    assert float(rows[-1]["rollout/ep_len_mean"]) <= 20


@algo_params(ALL_ALGOS)
def test_predict_recurrent_arguments(model_class):
    """``predict(obs, state, episode_start, deterministic)``: the recurrent-policy arguments are accepted and the
    state comes back as None."""
    model = model_class("MlpPolicy", "CartPole-v1", **algo_kwargs(model_class))
    obs = model.get_env().reset()
    action, state = model.predict(obs, state=None, episode_start=np.ones(1, dtype=bool), deterministic=True)
    assert state is None
    assert action.shape == (1,)


@pytest.mark.parametrize(
    ("reference", "model_class"), [(TRPO, ExactTRPO), (PPO, AdaptiveKLPPO)], ids=["ExactTRPO", "AdaptiveKLPPO"]
)
def test_takes_every_argument_of_its_reference(reference, model_class):
    """A TRPO (PPO) configuration ports: ExactTRPO (AdaptiveKLPPO) takes every argument its reference takes."""
    missing = set(inspect.signature(reference.__init__).parameters) - set(inspect.signature(model_class.__init__).parameters)
    assert not missing


@algo_params([TRPO, ExactTRPO])
def test_trpo_params(model_class):
    """contrib's ``test_trpo_params``: gSDE, minibatches, sub-sampling and a pi/vf net_arch."""
    model = model_class(
        "MlpPolicy",
        "Pendulum-v1",
        n_steps=64,
        batch_size=32,
        use_sde=True,
        sub_sampling_factor=4,
        seed=0,
        policy_kwargs=dict(net_arch=dict(pi=[32], vf=[32])),
        verbose=1,
    )
    model.learn(total_timesteps=256)


def test_exact_trpo_loads_a_trpo_save(tmp_path):
    """ExactTRPO is a drop-in for TRPO: a model saved by sb3-contrib's TRPO loads into ExactTRPO and trains on."""
    TRPO("MlpPolicy", "CartPole-v1", **algo_kwargs(TRPO)).learn(64).save(tmp_path / "trpo.zip")
    model = ExactTRPO.load(tmp_path / "trpo.zip", env=gym.make("CartPole-v1"))
    model.learn(64)
