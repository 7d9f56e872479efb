"""SB3 conformance: callbacks (SB3 ``tests/test_callbacks.py``): SB3's built-in callbacks, callbacks that stop
training, EvalCallback, CheckpointCallback, the progress bar and callback locals."""

import os

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params
from stable_baselines3.common.callbacks import (
    BaseCallback,
    CallbackList,
    CheckpointCallback,
    EvalCallback,
    EveryNTimesteps,
    LogEveryNTimesteps,
    StopTrainingOnMaxEpisodes,
    StopTrainingOnNoModelImprovement,
    StopTrainingOnRewardThreshold,
)
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_grpo import GRPO

ENV_ID = "Pendulum-v1"


def make_env() -> gym.Env:
    """Pendulum with episodes of 20 steps (evaluations stay cheap)."""
    return gym.make(ENV_ID, max_episode_steps=20)


@algo_params(ALL_ALGOS)
def test_callbacks(tmp_path, model_class):
    """SB3's built-in callbacks together, callback locals, counters, a list of callbacks, the progress bar and an
    old-style function callback."""
    log_folder = tmp_path / "logs/callbacks/"
    model = model_class("MlpPolicy", make_env(), policy_kwargs=dict(net_arch=[8]), **algo_kwargs(model_class))

    checkpoint_callback = CheckpointCallback(save_freq=128, save_path=log_folder)
    eval_env = make_env()
    callback_on_best = StopTrainingOnRewardThreshold(reward_threshold=0, verbose=1)  # never reached: training goes on
    callback_no_model_improvement = StopTrainingOnNoModelImprovement(max_no_improvement_evals=2, min_evals=1, verbose=1)
    eval_callback = EvalCallback(
        eval_env,
        callback_on_new_best=callback_on_best,
        callback_after_eval=callback_no_model_improvement,
        best_model_save_path=log_folder,
        log_path=log_folder,
        eval_freq=32,
        n_eval_episodes=1,
        warn=False,
    )
    checkpoint_on_event = CheckpointCallback(save_freq=1, save_path=log_folder, name_prefix="event")
    event_callback = EveryNTimesteps(n_steps=128, callback=checkpoint_on_event)
    log_callback = LogEveryNTimesteps(n_steps=64)
    callback_max_episodes = StopTrainingOnMaxEpisodes(max_episodes=100, verbose=1)

    callback = CallbackList([checkpoint_callback, eval_callback, event_callback, log_callback, callback_max_episodes])
    model.learn(128, callback=callback)

    assert model.env.observation_space.contains(callback.locals["new_obs"][0])
    assert checkpoint_callback.locals["new_obs"] is callback.locals["new_obs"]
    assert event_callback.locals["new_obs"] is callback.locals["new_obs"]
    assert checkpoint_on_event.locals["new_obs"] is callback.locals["new_obs"]
    assert event_callback.num_timesteps == model.num_timesteps
    assert event_callback.n_calls == model.num_timesteps
    assert eval_callback.n_calls == model.num_timesteps
    assert os.path.exists(log_folder / "evaluations.npz")
    assert os.path.exists(log_folder / "best_model.zip")
    model_class.load(log_folder / "best_model.zip")

    model.learn(128, callback=None)
    model.learn(128, callback=[checkpoint_callback, eval_callback], progress_bar=True)
    model.learn(128, callback=lambda _locals, _globals: True)


@algo_params(ALL_ALGOS)
def test_stop_on_max_episodes_multi_env(model_class):
    """StopTrainingOnMaxEpisodes with two envs: one episode per env, then training stops (SB3 checks timesteps too)."""
    n_envs, max_episode_length = 2, 100
    envs = make_vec_env(ENV_ID, n_envs=n_envs, seed=0, env_kwargs=dict(max_episode_steps=max_episode_length))
    model = model_class(
        "MlpPolicy", envs, policy_kwargs=dict(net_arch=[]), **algo_kwargs(model_class, n_steps=256, batch_size=64)
    )
    callback_max_episodes = StopTrainingOnMaxEpisodes(max_episodes=1, verbose=1)
    model.learn(2048, callback=CallbackList([callback_max_episodes]))
    assert callback_max_episodes.n_episodes // n_envs == 1
    assert model.num_timesteps // n_envs == max_episode_length


class AlwaysFailCallback(BaseCallback):
    def __init__(self, *args, callback_false_value, **kwargs):
        super().__init__(*args, **kwargs)
        self.callback_false_value = callback_false_value

    def _on_step(self) -> bool:
        return self.callback_false_value


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("callback_false_value", [False, np.bool_(0), th.tensor(0, dtype=th.bool)], ids=["bool", "np", "th"])
def test_callbacks_can_cancel_runs(model_class, callback_false_value):
    """A callback returning a false value on its first step stops training there, without a train() call."""
    model = model_class("MlpPolicy", make_env(), policy_kwargs=dict(net_arch=[2]), **algo_kwargs(model_class))
    params_before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    callback = AlwaysFailCallback(callback_false_value=callback_false_value)
    model.learn(10, callback=callback)
    assert callback.n_calls == 1
    for key, value in model.policy.state_dict().items():
        assert th.equal(params_before[key], value), key


class StopAfter(BaseCallback):
    """Stops training after ``n`` steps; counts rollouts and the calls of each hook."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n
        self.calls = dict(training_start=0, rollout_start=0, rollout_end=0, training_end=0)

    def _on_training_start(self) -> None:
        self.calls["training_start"] += 1

    def _on_rollout_start(self) -> None:
        self.calls["rollout_start"] += 1

    def _on_rollout_end(self) -> None:
        self.calls["rollout_end"] += 1

    def _on_training_end(self) -> None:
        self.calls["training_end"] += 1

    def _on_step(self) -> bool:
        return self.n_calls < self.n


@algo_params(ALL_ALGOS)
def test_callback_stops_mid_rollout(model_class):
    """Stopping in the middle of a later rollout: learn returns, the hooks were called in pairs, the model is
    usable and can learn again."""
    model = model_class("MlpPolicy", make_env(), policy_kwargs=dict(net_arch=[8]), seed=0, **algo_kwargs(model_class))
    callback = StopAfter(model.n_steps + 10)
    model.learn(10_000, callback=callback)
    assert callback.n_calls == model.n_steps + 10
    assert callback.calls["training_start"] == callback.calls["training_end"] == 1
    assert callback.calls["rollout_start"] >= 1
    assert model.num_timesteps < 10_000
    model.predict(make_env().reset(seed=0)[0])
    model.learn(64)


@algo_params(ALL_ALGOS)
def test_eval_callback_vec_env_and_vec_normalize_sync(model_class):
    """EvalCallback with a VecEnv of several envs, and VecNormalize statistics synchronised from the training env."""
    train_env = VecNormalize(DummyVecEnv([lambda: make_env()]))
    eval_env = VecNormalize(DummyVecEnv([lambda: make_env()] * 2), training=False, norm_reward=False)
    train_env.reset()
    original_obs = train_env.get_original_obs()
    model = model_class("MlpPolicy", train_env, seed=0, **algo_kwargs(model_class, n_steps=60, batch_size=60))
    # the last evaluation at the last step (rollouts of whole 20-step episodes), so no step updates the statistics after it
    eval_callback = EvalCallback(eval_env, eval_freq=20, n_eval_episodes=2, warn=False)
    model.learn(120, callback=eval_callback)
    assert eval_callback.last_mean_reward != -np.inf
    assert np.allclose(train_env.normalize_obs(original_obs), eval_env.normalize_obs(original_obs))

    # an eval env without VecNormalize next to a normalised training env: SB3 asserts (and warns)
    eval_callback = EvalCallback(make_env(), eval_freq=100, warn=False)
    with pytest.warns(Warning), pytest.raises(AssertionError):
        model.learn(200, callback=eval_callback)


@algo_params(ALL_ALGOS)
def test_checkpoint_additional_info(tmp_path, model_class):
    """CheckpointCallback saves the model and the VecNormalize statistics, and both load."""
    dummy_vec_env = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    env = VecNormalize(dummy_vec_env)
    checkpoint_dir = tmp_path / "checkpoints"
    checkpoint_callback = CheckpointCallback(save_freq=64, save_path=checkpoint_dir, save_vecnormalize=True, verbose=2)
    model = model_class("MlpPolicy", env, seed=0, **algo_kwargs(model_class))
    model.learn(128, callback=checkpoint_callback)
    assert os.path.exists(checkpoint_dir / "rl_model_64_steps.zip")
    assert os.path.exists(checkpoint_dir / "rl_model_vecnormalize_64_steps.pkl")
    model_class.load(checkpoint_dir / "rl_model_64_steps.zip")
    VecNormalize.load(checkpoint_dir / "rl_model_vecnormalize_64_steps.pkl", dummy_vec_env)


@algo_params(ALL_ALGOS)
def test_eval_callback_chaining(tmp_path, model_class):
    """Callbacks chained to EvalCallback see it as their parent."""

    class DummyCallback(BaseCallback):
        def _on_step(self):
            assert isinstance(self.parent, EvalCallback)
            assert hasattr(self.parent, "best_mean_reward")
            return True

    eval_callback = EvalCallback(
        make_env(),
        best_model_save_path=tmp_path,
        log_path=tmp_path,
        eval_freq=32,
        n_eval_episodes=1,
        deterministic=True,
        callback_on_new_best=CallbackList([DummyCallback(), StopTrainingOnRewardThreshold(reward_threshold=-200)]),
        callback_after_eval=CallbackList([DummyCallback()]),
        warn=False,
    )
    model = model_class("MlpPolicy", make_env(), **algo_kwargs(model_class))
    model.learn(64, callback=eval_callback)


def test_grpo_callback_sees_every_env_step():
    """GRPO calls ``on_step`` once per VecEnv step, also while some slots wait for their group (n_calls counts env
    steps, num_timesteps counts recorded steps)."""
    model = GRPO("MlpPolicy", make_vec_env(make_env, n_envs=3, seed=0), **algo_kwargs(GRPO))
    callback = StopAfter(10**9)
    model.learn(64, callback=callback)
    assert callback.n_calls * 3 >= model.num_timesteps
