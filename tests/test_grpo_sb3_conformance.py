"""What SB3's PPO accepts, GRPO accepts: resets without options, net_arch forms, squashed gSDE, box actions, SB3's
identity test, custom training loops, minibatches."""

import contextlib

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from envs import AnySpacesEnv, NoOptionsResetEnv
from grpo_helpers import first_obs_by_group
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_grpo import GRPO

# -------------------------------------------------------------------------
# SB3 conformance: what SB3's PPO accepts, GRPO accepts
# -------------------------------------------------------------------------


@pytest.mark.parametrize("make_env", [NoOptionsResetEnv, lambda: DummyVecEnv([NoOptionsResetEnv] * 2)])
def test_env_whose_reset_takes_no_options(make_env):
    # SB3's DummyVecEnv passes `options` only when there are some; GRPO's seeded reset must do the same.
    model = GRPO("MlpPolicy", make_env(), group_size=2, n_steps=10, policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu")
    model.learn(40)
    assert model.num_timesteps >= 40
    for group in first_obs_by_group(model.rollout_buffer, 2):
        np.testing.assert_array_equal(group[0], group[1])  # the seed still reached the env


@pytest.mark.parametrize(
    "net_arch, warning",
    [
        ([16, 8], None),
        (dict(pi=[16, 8]), None),
        (dict(pi=[16, 8], vf=[32]), "no value network"),
        ([dict(pi=[16, 8], vf=[32])], "you should now pass directly a dictionary"),  # SB3's older form
    ],
)
def test_net_arch_forms_sb3_accepts(net_arch, warning, tmp_path):
    context = pytest.warns(UserWarning, match=warning) if warning else contextlib.nullcontext()
    with context:
        model = GRPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=net_arch), seed=0, device="cpu")
    assert model.policy.net_arch == [16, 8]
    linear = [m.out_features for m in model.policy.policy_net if isinstance(m, th.nn.Linear)]
    assert linear == [16, 8]
    model.save(tmp_path / "m.zip")
    assert GRPO.load(tmp_path / "m.zip", device="cpu").policy.net_arch == [16, 8]


@pytest.mark.parametrize(
    "net_arch, match",
    [
        ([dict(pi=[8]), dict(pi=[4])], "exactly one dict"),
        (dict(pi=[8], qf=[4]), r"keys must be 'pi'"),
        ([8, "tanh"], "list of positive layer sizes"),
        ([8, 0], "list of positive layer sizes"),
    ],
)
def test_bad_net_arch_is_refused_with_the_forms_accepted(net_arch, match):
    with pytest.raises(ValueError, match=match):
        GRPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=net_arch), device="cpu")


class _RecordActions(gym.Wrapper):
    """Keeps every action the env receives."""

    received: list = []

    def step(self, action):
        _RecordActions.received.append(np.array(action))
        return super().step(action)


def test_squash_output_with_gsde_as_sb3_ppo(tmp_path):
    _RecordActions.received = []
    env = DummyVecEnv([lambda: _RecordActions(gym.make("Pendulum-v1"))] * 2)  # actions in [-2, 2]
    model = GRPO(
        "MlpPolicy", env, n_steps=100, group_size=2, use_sde=True, policy_kwargs=dict(squash_output=True, net_arch=[8]),
        seed=0, device="cpu",
    )  # fmt: skip
    assert model.policy.squash_output
    model._setup_learn(400, None)
    model.collect_rollouts(model.env, model._init_callback(None), model.rollout_buffer, model.n_steps)
    buffer = model.rollout_buffer
    assert np.abs(buffer.actions).max() <= 1.0  # stored squashed, as the distribution's log_prob expects them
    received = np.concatenate(_RecordActions.received)
    assert np.abs(received).max() <= 2.0 and np.abs(received).max() > 1.0  # rescaled to the env's bounds
    with th.no_grad():
        log_prob, _ = model.policy.evaluate_actions(th.as_tensor(buffer.observations), th.as_tensor(buffer.actions))
    np.testing.assert_allclose(log_prob.numpy(), buffer.old_log_prob, rtol=1e-4, atol=1e-4)  # ratio 1 before the update
    model.learn(400, reset_num_timesteps=False)
    actions = model.predict(env.reset())[0]
    assert np.abs(actions).max() <= 2.0
    model.save(tmp_path / "squash.zip")
    assert GRPO.load(tmp_path / "squash.zip", device="cpu").policy.squash_output


def test_squash_output_without_gsde_is_refused_as_sb3_does():
    with pytest.raises(ValueError, match=r"only available with gSDE \(use_sde=True\)"):
        GRPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(squash_output=True), device="cpu")


@pytest.mark.parametrize("use_sde", [False, True])
def test_multidimensional_box_actions(use_sde):
    # SB3's test_spaces.py: a Box action space of shape (2, 2); the Gaussian's event is the flat action.
    action_space = gym.spaces.Box(-1, 1, (2, 2), np.float32)
    env = gym.wrappers.TimeLimit(AnySpacesEnv(gym.spaces.Box(-1, 1, (3,), np.float32), action_space), 10)
    model = GRPO(
        "MlpPolicy", env, n_steps=20, group_size=2, use_sde=use_sde, policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu"
    )
    model._setup_learn(40, None)
    model.collect_rollouts(model.env, model._init_callback(None), model.rollout_buffer, model.n_steps)
    buffer = model.rollout_buffer
    samples = buffer._samples(np.arange(buffer.size()))
    with th.no_grad():
        log_prob, _ = model.policy.evaluate_actions(samples.observations, samples.actions)
    np.testing.assert_allclose(log_prob.numpy(), buffer.old_log_prob, rtol=1e-5, atol=1e-5)  # ratio 1 before the update
    model.learn(40, reset_num_timesteps=False)
    action, _ = model.predict(env.reset()[0])
    assert action.shape == (2, 2) and action_space.contains(action)


@pytest.mark.parametrize("kind", ["discrete", "multidiscrete"])
def test_the_default_estimator_passes_sb3s_identity_test(kind):
    # SB3's tests/test_identity.py with the settings it gives PPO: dense per-step rewards, mean >= 90 of 100. One
    # score per whole episode (group_zscore, the former default) reached 74 and 13 here.
    from stable_baselines3.common.envs import IdentityEnv, IdentityEnvMultiDiscrete

    env = IdentityEnv(4) if kind == "discrete" else IdentityEnvMultiDiscrete(4)
    venv = DummyVecEnv([lambda: env])
    # SB3's identity envs do not seed their states from the reset seed: the documented escape
    model = GRPO(
        "MlpPolicy", venv, gamma=0.4, learning_rate=0.002, n_steps=256, n_epochs=4, verify_group_starts=False, seed=3,
        device="cpu",
    )  # fmt: skip
    assert model.advantage_estimator == "group_auto"
    model.learn(1200)
    mean, _ = evaluate_policy(model, venv, n_eval_episodes=20, warn=False)
    assert mean >= 90


def test_custom_training_loop_sees_a_full_buffer():
    # SB3's custom loops: _setup_learn, then collect_rollouts / train, checking rollout_buffer.full as for PPO
    model = GRPO("MlpPolicy", "CartPole-v1", n_steps=32, group_size=2, batch_size=32, seed=0, device="cpu")
    assert not model.rollout_buffer.full
    _, callback = model._setup_learn(256)
    for _ in range(2):
        assert model.collect_rollouts(model.get_env(), callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
        assert model.rollout_buffer.full and model.rollout_buffer.size() >= model.n_steps
        model.train()
    model.rollout_buffer.reset()
    assert not model.rollout_buffer.full


def test_reference_policy_with_gsde():
    """A reference policy (beta > 0) copies a gSDE policy, whose noise tensors are not graph leaves."""
    model = GRPO("MlpPolicy", "Pendulum-v1", use_sde=True, beta=0.1, n_steps=64, group_size=2, batch_size=64, n_epochs=1)
    model.learn(256)
    assert model.ref_policy is not None and np.isfinite(model.logger.name_to_value["train/kl_ref"])
    for ref, param in zip(model.ref_policy.parameters(), model.policy.parameters(), strict=True):
        assert not ref.requires_grad and ref.data_ptr() != param.data_ptr()


@pytest.mark.parametrize("n, sizes", [(8, [4, 4]), (10, [4, 4, 2]), (9, [4, 5]), (5, [5]), (1, [1])])
def test_minibatches_cover_the_batch_once_and_a_last_single_step_joins_the_one_before(n, sizes):
    """The batch size varies with the episodes; a last minibatch of one step (which a BatchNorm layer cannot train
    on, and whose loss, scaled up to the batch, is one step's noise) joins the minibatch before it."""
    from gymnasium import spaces

    from sb3_grpo.common.groups.buffers import GroupRolloutBuffer

    buffer = GroupRolloutBuffer(spaces.Box(-1.0, 1.0, (1,)), spaces.Discrete(2))
    obs = np.arange(n, dtype=np.float32).reshape(n, 1)
    buffer.fill(obs, np.zeros((n, 1)), np.zeros(n), np.ones(n), np.full(n, 1.0 / n), np.arange(n) // 3)
    batches = list(buffer.get(4, np.random.default_rng(0)))
    assert [len(b.advantages) for b in batches] == sizes
    seen = np.concatenate([b.observations.numpy().ravel() for b in batches])
    np.testing.assert_array_equal(np.sort(seen), obs.ravel())
    for b in batches:  # each minibatch's weights scaled by N / m: an unbiased estimate of the full-batch loss
        np.testing.assert_allclose(b.weights.sum().item(), 1.0, rtol=1e-6)
