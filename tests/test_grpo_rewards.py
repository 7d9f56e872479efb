"""GRPO's reward functions in training: a removed survival bonus, per-function discounts, running statistics kept
across save and load."""

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from sb3_grpo import GRPO
from sb3_grpo.default_plugins.advantage_estimators import GroupStepBaseline


def test_training_reward_without_the_healthy_reward_reaches_the_update():
    """InvertedPendulum pays only the survival bonus: with it removed every training reward is 0, so the update
    sees zero advantages and leaves the policy unchanged, while the episode returns (Monitor) are still the env's."""
    pytest.importorskip("mujoco")
    model = GRPO(
        "MlpPolicy",
        make_vec_env("InvertedPendulum-v5", n_envs=4, seed=0),
        n_steps=64,
        group_size=4,
        reward_functions=["episodic_return", "healthy_reward"],
        reward_weights=[1.0, -1.0],
        seed=0,
        device="cpu",
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(512)
    assert model.rollout_buffer.stats["rollout/outcome_reward_mean"] == 0.0
    assert len(model.ep_info_buffer) > 0 and min(ep["r"] for ep in model.ep_info_buffer) >= 1.0
    for old, new in zip(before, model.policy.parameters(), strict=True):
        th.testing.assert_close(old, new, rtol=0, atol=0)


def test_reward_gammas_discount_each_reward_function_apart(tmp_path):
    """The estimator is handed each reward function's per-step rewards with its own discount; they sum to the
    rewards it would see otherwise, and the discounts survive save and load."""
    pytest.importorskip("mujoco")
    seen = []

    class Spy(GroupStepBaseline):
        def compute(self, inputs):
            seen.append(inputs)
            return super().compute(inputs)

    kwargs = dict(
        n_steps=32,
        group_size=4,
        reward_functions=["without_healthy_reward", "healthy_reward"],
        reward_gammas=[0.9, 0.999],
        seed=0,
        device="cpu",
    )
    model = GRPO("MlpPolicy", make_vec_env("Hopper-v5", n_envs=4, seed=0), advantage_estimator=Spy(), **kwargs)
    model.learn(100)
    inputs = seen[-1]
    (healthy_free, g1), (healthy, g2) = inputs.extras["reward_streams"]
    assert (g1, g2) == (0.9, 0.999)
    np.testing.assert_allclose(healthy_free + healthy, inputs.rewards, atol=1e-12)
    # Hopper's survival bonus: 1 on every step but a trajectory's last (0 there when it fell)
    assert np.all(healthy[:-1][inputs.valid[1:]] == 1.0) and set(np.unique(healthy[inputs.valid])) <= {0.0, 1.0}
    plain = GRPO(
        "MlpPolicy",
        make_vec_env("Hopper-v5", n_envs=4, seed=0),
        advantage_estimator=Spy(),
        **{**kwargs, "reward_gammas": None},
    )
    plain.learn(100)
    assert "reward_streams" not in seen[-1].extras
    np.testing.assert_allclose(seen[-1].rewards, inputs.rewards)  # same seed, same first rollout
    model.save(tmp_path / "streams.zip")
    loaded = GRPO.load(tmp_path / "streams.zip", device="cpu")
    assert loaded.reward_gammas == [0.9, 0.999]


def test_floored_scale_keeps_its_running_statistics_across_save_and_load(tmp_path):
    """scale='floored' is stateful: the running moments of past advantages are saved with the model and go on."""
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = GRPO(
        "MlpPolicy",
        env,
        n_steps=200,
        group_size=2,
        n_epochs=1,
        seed=0,
        device="cpu",
        advantage_estimator="group_step_baseline",
        advantage_kwargs=dict(scale="floored"),
    )
    model.learn(400)
    state = (model._estimator.running_count, model._estimator.running_mean, model._estimator.running_var)
    assert state[0] == 800 and state[2] > 0.0  # one rollout: groups open until 400 steps, then finish (800)
    model.save(tmp_path / "floored.zip")
    loaded = GRPO.load(tmp_path / "floored.zip", env=make_vec_env("Pendulum-v1", n_envs=2, seed=1), device="cpu")
    assert (loaded._estimator.running_count, loaded._estimator.running_mean, loaded._estimator.running_var) == state
    loaded.learn(400, reset_num_timesteps=False)
    assert loaded._estimator.running_count == 1600


def test_load_with_other_estimator_arguments_builds_the_estimator_from_them(tmp_path):
    """The saved estimator object was built from the saved advantage_kwargs: load(advantage_kwargs=<others>) builds
    it again from the ones given (before, they were stored and silently unused); the same ones keep its state."""
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    kwargs = dict(n_steps=200, group_size=2, n_epochs=1, seed=0, device="cpu", advantage_estimator="group_step_baseline")
    model = GRPO("MlpPolicy", env, advantage_kwargs=dict(scale="floored"), **kwargs)
    model.learn(400)
    model.save(tmp_path / "m.zip")
    same = GRPO.load(tmp_path / "m.zip", env=env, advantage_kwargs=dict(scale="floored"))
    assert same._estimator.running_count == model._estimator.running_count > 0
    other = GRPO.load(tmp_path / "m.zip", env=env, advantage_kwargs=dict(scale="none", lam=0.9))
    assert (other._estimator.scale, other._estimator.lam, other._estimator.running_count) == ("none", 0.9, 0)
    other.learn(400, reset_num_timesteps=False)
    named = GRPO.load(tmp_path / "m.zip", env=env, advantage_estimator="group_zscore", advantage_kwargs=None)
    assert type(named._estimator).__name__ == "GroupZScore"


def test_stream_scale_each_in_grpo(tmp_path):
    """advantage_kwargs=dict(stream_scale="each") with reward_gammas: the advantages GRPO trains on are the
    estimator's with each reward function scaled on its own; without reward_gammas, or with the KL penalty in the
    rewards (a stream that is no reward function), GRPO refuses it; a switch to it at load takes effect."""
    pytest.importorskip("mujoco")
    seen: list = []
    kwargs = dict(n_steps=64, group_size=4, n_epochs=1, seed=0, device="cpu")
    streams = dict(reward_functions=["without_healthy_reward", "healthy_reward"], reward_gammas=[0.97, 0.999])
    env = make_vec_env("Hopper-v5", n_envs=4, seed=0)
    model = GRPO("MlpPolicy", env, advantage_estimator=Recording(seen, stream_scale="each"), **streams, **kwargs)
    model.learn(300)
    inputs, advantages = seen[-1]
    np.testing.assert_allclose(advantages, GroupStepBaseline(stream_scale="each").compute(inputs).advantages)
    assert not np.allclose(advantages, GroupStepBaseline().compute(inputs).advantages)
    each = dict(advantage_estimator="group_step_baseline", advantage_kwargs=dict(stream_scale="each"))
    with pytest.raises(ValueError, match="needs one discount per reward function: give reward_gammas"):
        GRPO("MlpPolicy", env, reward_functions=["without_healthy_reward"], **each, **kwargs)
    with pytest.raises(ValueError, match=r"reward_weights \[2.0, 1.0\] would change nothing but their signs"):
        GRPO("MlpPolicy", env, reward_weights=[2.0, 1.0], **streams, **each, **kwargs)
    GRPO("MlpPolicy", env, reward_weights=[1.0, -1.0], **streams, **each, **kwargs)  # signs are kept
    with pytest.raises(ValueError, match=r"keep the penalty in the loss \(kl_in_reward=False\)"):
        GRPO("MlpPolicy", env, beta=0.01, kl_in_reward=True, **streams, **each, **kwargs)
    plain = GRPO("MlpPolicy", env, advantage_estimator="group_step_baseline", **streams, **kwargs)
    plain.save(tmp_path / "plain.zip")
    loaded = GRPO.load(tmp_path / "plain.zip", env=env, advantage_kwargs=dict(stream_scale="each"))
    assert loaded._estimator.scales_reward_streams


class Recording(GroupStepBaseline):
    """``group_step_baseline`` that appends each batch's inputs and advantages to ``seen``."""

    def __init__(self, seen: list, **kwargs):
        super().__init__(**kwargs)
        self.seen = seen

    def compute(self, inputs):
        outputs = super().compute(inputs)
        self.seen.append((inputs, outputs.advantages))
        return outputs


def test_state_baseline_reaches_the_advantages_and_the_log(tmp_path):
    """advantage_kwargs=dict(state_baseline=True): the estimator is handed each step's observation as the policy saw
    it (normalised by VecNormalize), changes the advantages GRPO trains on, logs the fraction its fit removed, and is
    saved with the model, which loads and learns on."""
    seen: list = []
    kwargs = dict(n_steps=200, group_size=2, n_epochs=1, seed=0, device="cpu")
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    model = GRPO("MlpPolicy", env, advantage_estimator=Recording(seen, state_baseline=True), **kwargs)
    model.learn(400)
    inputs, advantages = seen[-1]
    assert inputs.observations.shape == (*inputs.shape, 3)
    first = inputs.observations[: inputs.lengths[0], 0]
    np.testing.assert_allclose(first, model.rollout_buffer.observations[: inputs.lengths[0]].reshape(-1, 3), rtol=1e-6)
    assert np.abs(first).max() <= 10.0 and not np.allclose(first[:, 2], 0.0)  # clipped and scaled: VecNormalize's
    explained = model.logger.name_to_value["train/state_baseline_explained"]
    assert 0.0 <= explained < 1.0 and explained == model._estimator.state_explained
    assert "train/reward_history_explained" not in model.logger.name_to_value
    plain = GroupStepBaseline().compute(inputs).advantages
    assert explained == 0.0 or not np.allclose(plain, advantages)
    model.save(tmp_path / "state.zip")
    loaded = GRPO.load(tmp_path / "state.zip", env=env, device="cpu")
    assert loaded._estimator.state_baseline and "observations" in loaded._estimator.requires
    loaded.learn(400, reset_num_timesteps=False)
    assert loaded._estimator.state_explained == loaded.logger.name_to_value["train/state_baseline_explained"]


def test_flat_observations_of_every_space():
    from sb3_grpo.grpo.batch import flat_observations

    np.testing.assert_array_equal(flat_observations(np.arange(12).reshape(2, 2, 3)), np.arange(12.0).reshape(2, 6))
    np.testing.assert_array_equal(flat_observations(np.array([3, 1])), [[3.0], [1.0]])  # Discrete
    both = {"b": np.array([[1.0], [2.0]]), "a": np.array([[5, 6], [7, 8]])}
    np.testing.assert_array_equal(flat_observations(both), [[5.0, 6.0, 1.0], [7.0, 8.0, 2.0]])  # keys in sorted order


def test_reward_history_reaches_the_advantages_and_the_log(tmp_path):
    """advantage_kwargs=dict(reward_history=True) changes the advantages GRPO trains on, logs the fraction its fit
    removed, and is saved with the model."""
    seen: list = []
    kwargs = dict(n_steps=200, group_size=2, n_epochs=1, seed=0, device="cpu")
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = GRPO("MlpPolicy", env, advantage_estimator=Recording(seen, reward_history=True), **kwargs)
    model.learn(400)
    inputs, advantages = seen[-1]
    explained = model.logger.name_to_value["train/reward_history_explained"]
    assert 0.0 < explained < 1.0 and explained == model._estimator.history_explained
    plain = GroupStepBaseline().compute(inputs).advantages
    assert not np.allclose(plain, advantages)
    model.save(tmp_path / "history.zip")
    loaded = GRPO.load(tmp_path / "history.zip", device="cpu")
    assert loaded._estimator.reward_history
    model = GRPO("MlpPolicy", env, advantage_estimator="group_step_baseline", **kwargs)
    model.learn(400)
    assert "train/reward_history_explained" not in model.logger.name_to_value
