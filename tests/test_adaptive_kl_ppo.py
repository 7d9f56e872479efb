"""AdaptiveKLPPO: the loss, the beta update, PPO equivalence, save/load, devices, action spaces, bad arguments."""

import copy
import inspect

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from envs import TargetEnv
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from torch.distributions import Categorical, Normal, kl_divergence

from sb3_grpo.adaptive_kl_ppo import AdaptiveKLPPO

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not th.cuda.is_available(), reason="no CUDA device"))]
SMALL = dict(n_steps=64, batch_size=32, n_epochs=2, seed=0)


def _target_env(kind="discrete", n_envs=2):
    return make_vec_env(TargetEnv, n_envs=n_envs, seed=0, env_kwargs=dict(kind=kind))


class DictTargetEnv(gym.Wrapper):
    """TargetEnv with a Dict observation (for MultiInputPolicy)."""

    def __init__(self):
        super().__init__(TargetEnv("discrete"))
        self.observation_space = spaces.Dict({"target": self.env.observation_space, "t": spaces.Box(0, 10, (1,))})

    def _wrap(self, obs):
        return {"target": obs, "t": np.array([self.env.t], dtype=np.float32)}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._wrap(obs), info

    def step(self, action):
        obs, *rest = self.env.step(action)
        return (self._wrap(obs), *rest)


class TamperRollout(BaseCallback):
    """At the end of the rollout (after the advantages, before ``train``): set every old log-prob to
    ``log_prob - shift`` (so the first ratio is ``exp(shift)`` everywhere) and every advantage to ``|A| + 0.1``."""

    def __init__(self, shift):
        super().__init__()
        self.shift = shift

    def _on_step(self):
        return True

    def _on_rollout_end(self):
        buffer = self.model.rollout_buffer
        buffer.log_probs = buffer.log_probs - self.shift
        buffer.advantages = np.abs(buffer.advantages) + 0.1
        self.model._snapshot = dict(
            advantages=buffer.advantages.copy(), policy=copy.deepcopy(self.model.policy), obs=buffer.observations.copy()
        )


def _one_minibatch_model(env, **kwargs):
    """One rollout of 64 steps = one minibatch, one epoch: the logged losses are those of that one minibatch."""
    args = dict(n_steps=32, batch_size=64, n_epochs=1, normalize_advantage=False, seed=0, learning_rate=1e-2)
    args.update(kwargs)
    return AdaptiveKLPPO("MlpPolicy", env, **args)


def _actor_params(model):
    return {
        k: v.clone() for k, v in model.policy.state_dict().items() if not k.startswith(("value_net", "mlp_extractor.value"))
    }


# ---------------------------------------------------------------- the loss


def test_without_clip_range_the_surrogate_is_the_unclipped_ratio_and_its_gradient_survives():
    shift = 1.0  # ratio e = 2.72, far outside [0.8, 1.2]
    moved = {}
    for clip_range in (None, 0.2):
        model = _one_minibatch_model(_target_env(), clip_range=clip_range, kl_coef=0.0, kl_adaptation="fixed", vf_coef=0.0)
        before = _actor_params(model)
        model.learn(64, callback=TamperRollout(shift))
        logged = model.logger.name_to_value
        advantages = th.as_tensor(model._snapshot["advantages"])
        if clip_range is None:
            expected = -(np.e * advantages).mean()
            assert "train/clip_fraction" not in logged
        else:
            expected = -((1 + clip_range) * advantages).mean()
            assert logged["train/clip_fraction"] == 1.0
        assert logged["train/policy_gradient_loss"] == pytest.approx(float(expected), rel=1e-5)
        after = _actor_params(model)
        moved[clip_range] = max(float((after[k] - before[k]).abs().max()) for k in before)
    # With every ratio above 1 + eps and every advantage positive, clipping zeroes the policy gradient;
    # without clipping the actor moves.
    assert moved[0.2] == 0.0
    assert moved[None] > 1e-4


@pytest.mark.parametrize("estimator, per_sample_kl", [("k1", -1.0), ("k3", np.e - 2.0), ("exact", 0.0)])
def test_loss_is_surrogate_plus_beta_kl_plus_value_minus_entropy(estimator, per_sample_kl):
    # log_ratio = +1 on every sample: k1 = -1, k3 = e - 1 - 1; the exact KL of a policy with itself is 0
    # (the tampered old log-probs do not enter the exact KL, which compares distributions).
    beta, vf_coef, ent_coef = 0.7, 0.3, 0.05
    model = _one_minibatch_model(
        _target_env(), kl_coef=beta, kl_adaptation="fixed", kl_estimator=estimator, vf_coef=vf_coef, ent_coef=ent_coef
    )
    model.learn(64, callback=TamperRollout(1.0))
    v = model.logger.name_to_value
    assert v["train/kl_loss"] == pytest.approx(beta * per_sample_kl, abs=1e-5)
    expected = (
        v["train/policy_gradient_loss"]
        + beta * per_sample_kl
        + vf_coef * v["train/value_loss"]
        + ent_coef * v["train/entropy_loss"]
    )
    assert v["train/loss"] == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert v["train/kl_coef"] == beta and model.kl_coef == beta


def test_measured_kl_is_the_exact_kl_over_the_batch_and_drives_the_schulman_rule():
    model = AdaptiveKLPPO("MlpPolicy", _target_env(), n_steps=64, batch_size=32, n_epochs=4, learning_rate=3e-3, seed=0)

    class Snapshot(BaseCallback):
        def _on_step(self):
            return True

        def _on_rollout_end(self):
            self.model._old_policy = copy.deepcopy(self.model.policy)

    model.learn(128, callback=Snapshot())  # two updates: beta 1.0 -> beta_1 -> beta_2
    beta_used = model.logger.name_to_value["train/kl_coef"]
    obs = th.as_tensor(model.rollout_buffer.observations, device=model.device)  # cuda where one is visible
    with th.no_grad():
        old = Categorical(logits=model._old_policy.get_distribution(obs).distribution.logits)
        new = Categorical(logits=model.policy.get_distribution(obs).distribution.logits)
        d = float(kl_divergence(old, new).mean())
    assert model.logger.name_to_value["train/kl"] == pytest.approx(d, rel=1e-4)
    expected = beta_used / 2 if d < 0.01 / 1.5 else beta_used * 2 if d > 0.015 else beta_used
    assert model.kl_coef == expected
    assert beta_used in (0.5, 1.0, 2.0)


@pytest.mark.parametrize("kl_adaptation", ["schulman", "rllib", "proportional", "fixed"])
def test_every_adaptation_rule_trains_and_stays_within_bounds(kl_adaptation):
    model = AdaptiveKLPPO(
        "MlpPolicy", _target_env(), kl_adaptation=kl_adaptation, kl_horizon=100, kl_coef_min=0.3, kl_coef_max=3.0, **SMALL
    )
    model.learn(192)
    assert 0.3 <= model.kl_coef <= 3.0
    if kl_adaptation == "fixed":
        assert model.kl_coef == 1.0


# ---------------------------------------------------------------- PPO equivalence, determinism


@pytest.mark.parametrize("early_stop", [None, 0.002])
def test_zero_fixed_penalty_with_clipping_is_ppo_bitwise(early_stop):
    """kl_coef=0 with clip_range=0.2 is SB3's PPO (same minibatches, same losses), early stopping included."""
    args = dict(n_steps=64, batch_size=32, n_epochs=3, seed=3, learning_rate=3e-3)
    ours = AdaptiveKLPPO(
        "MlpPolicy", "CartPole-v1", kl_coef=0.0, kl_adaptation="fixed", clip_range=0.2, early_stop_kl=early_stop, **args
    ).learn(256)
    ppo = PPO("MlpPolicy", "CartPole-v1", target_kl=early_stop, **args).learn(256)
    ours_state, ppo_state = ours.policy.state_dict(), ppo.policy.state_dict()
    assert all(th.equal(ours_state[k], ppo_state[k]) for k in ppo_state)
    assert ours._n_updates == ppo._n_updates


def test_same_seed_same_parameters():
    a, b = (AdaptiveKLPPO("MlpPolicy", _target_env("box"), **SMALL).learn(192) for _ in range(2))
    assert all(th.equal(a.policy.state_dict()[k], b.policy.state_dict()[k]) for k in a.policy.state_dict())
    assert a.kl_coef == b.kl_coef


def test_every_ppo_argument_is_accepted():
    ppo_args = set(inspect.signature(PPO.__init__).parameters)
    ours = set(inspect.signature(AdaptiveKLPPO.__init__).parameters)
    assert ppo_args <= ours
    # an rl-zoo PPO config (CartPole-v1) ports by changing the algorithm name
    zoo = dict(
        n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0, learning_rate=1e-3, clip_range=0.2
    )
    model = AdaptiveKLPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), **zoo)
    assert model.clip_range(1.0) == 0.2 and model.target_kl == 0.01


# ---------------------------------------------------------------- state


def test_beta_survives_save_load_and_continues(tmp_path):
    model = AdaptiveKLPPO("MlpPolicy", _target_env(), **SMALL).learn(192)
    adapted = model.kl_coef
    assert adapted != 1.0
    model.save(tmp_path / "m")
    loaded = AdaptiveKLPPO.load(tmp_path / "m", env=_target_env())
    assert loaded.kl_coef == adapted
    assert loaded._kl_controller.kl_coef == adapted
    loaded.learn(64, reset_num_timesteps=False)
    assert loaded.logger.name_to_value["train/kl_coef"] == adapted  # the next update used the adapted beta
    assert loaded.kl_coef in (adapted / 2, adapted, adapted * 2)
    # a beta set by hand is the one the next update uses
    loaded.kl_coef = 0.123
    loaded.learn(64, reset_num_timesteps=False)
    assert loaded.logger.name_to_value["train/kl_coef"] == 0.123


def test_logger_keys():
    expected = {
        "train/kl_coef",
        "train/kl",
        "train/kl_loss",
        "train/policy_gradient_loss",
        "train/value_loss",
        "train/approx_kl",
        "train/explained_variance",
        "train/entropy_loss",
        "train/loss",
    }
    pure = AdaptiveKLPPO("MlpPolicy", _target_env(), **SMALL).learn(64)
    assert expected <= set(pure.logger.name_to_value)
    assert "train/clip_fraction" not in pure.logger.name_to_value
    clipped = AdaptiveKLPPO("MlpPolicy", _target_env("box"), clip_range=lambda p: 0.1 * p, **SMALL).learn(64)
    keys = set(clipped.logger.name_to_value)
    assert expected | {"train/clip_fraction", "train/clip_range", "train/std"} <= keys


# ---------------------------------------------------------------- spaces, estimators, devices


@pytest.mark.parametrize("kind", ["discrete", "box", "multidiscrete", "multibinary"])
@pytest.mark.parametrize("kl_estimator", ["exact", "k1", "k3"])
def test_runs_on_every_action_space_with_every_estimator(kind, kl_estimator):
    model = AdaptiveKLPPO(
        "MlpPolicy", _target_env(kind), kl_estimator=kl_estimator, n_steps=32, batch_size=32, n_epochs=1, seed=0
    )
    model.learn(64)
    v = model.logger.name_to_value
    assert np.isfinite(v["train/loss"]) and v["train/kl"] >= 0.0 and np.isfinite(model.kl_coef)


def test_dict_observations_and_advantage_estimators():
    env = make_vec_env(DictTargetEnv, n_envs=2, seed=0)
    model = AdaptiveKLPPO("MultiInputPolicy", env, advantage_estimator="td", **SMALL).learn(64)
    assert np.isfinite(model.logger.name_to_value["train/loss"])


@pytest.mark.parametrize("squash_output", [False, True])
def test_gsde_uses_the_exact_kl_by_default(squash_output):
    """gSDE (PPO's rl-zoo setting) with the default kl_estimator="exact": the measured KL is the Gaussian KL of the
    per-state mean and standard deviation (torch.distributions oracle, the old policy snapshotted before the update)."""

    class Snapshot(BaseCallback):
        def _on_step(self):
            return True

        def _on_rollout_end(self):
            obs = th.as_tensor(self.model.rollout_buffer.observations, device=self.model.device).flatten(0, 1)
            with th.no_grad():
                old = self.model.policy.get_distribution(obs).distribution
                self.model._old = (obs, Normal(old.mean.clone(), old.stddev.clone()))

    policy_kwargs = dict(squash_output=squash_output, net_arch=[16])
    model = AdaptiveKLPPO("MlpPolicy", _target_env("box"), use_sde=True, policy_kwargs=policy_kwargs, **SMALL)
    assert model.kl_estimator == "exact" and model._exact_kl_available
    model.learn(64, callback=Snapshot())
    obs, old = model._old
    with th.no_grad():
        new = model.policy.get_distribution(obs).distribution
        d = float(kl_divergence(old, Normal(new.mean, new.stddev)).sum(-1).mean())
    assert d > 0
    assert model.logger.name_to_value["train/kl"] == pytest.approx(d, rel=1e-4)
    assert np.isfinite(model.logger.name_to_value["train/kl_loss"]) and model.logger.name_to_value["train/kl_loss"] > 0
    # the sampled estimators still work with gSDE
    AdaptiveKLPPO("MlpPolicy", _target_env("box"), use_sde=True, kl_estimator="k3", **SMALL).learn(64)


@pytest.mark.parametrize("device", DEVICES)
def test_learn_predict_save_load_on_device(device, tmp_path):
    model = AdaptiveKLPPO("MlpPolicy", _target_env("box"), device=device, **SMALL).learn(128)
    assert model.policy.device.type == device
    model.save(tmp_path / "m")
    loaded = AdaptiveKLPPO.load(tmp_path / "m", device=device)
    assert loaded.kl_coef == model.kl_coef
    obs = np.zeros((1, 4), dtype=np.float32)
    np.testing.assert_allclose(
        loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0], rtol=1e-6
    )


# ---------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kl_coef=-0.5), "kl_coef must be >= 0"),
        (dict(target_kl=0.0), "target_kl must be > 0"),
        (dict(target_kl=-1.0), "target_kl must be > 0"),
        (dict(target_kl=None), "target_kl must be a number > 0.*early_stop_kl"),
        (dict(kl_estimator="k2"), "unknown kl_estimator 'k2'"),
        (dict(kl_adaptation="pid"), "unknown kl_adaptation 'pid'"),
        (dict(kl_adaptation="proportional", kl_horizon=-1), "kl_horizon must be > 0"),
        (dict(kl_coef_min=1.0, kl_coef_max=0.1), "kl_coef_min .* must not exceed kl_coef_max"),
        (dict(kl_coef=0.0), "kl_coef must be > 0 with kl_adaptation='schulman'"),
        (dict(clip_range=-0.2), "clip_range must be None, a number > 0 or a schedule"),
        (dict(early_stop_kl=0.0), "early_stop_kl must be None or a number > 0"),
        (dict(batch_size=1), "batch_size must be > 1"),
    ],
)
def test_bad_arguments_fail_at_construction_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AdaptiveKLPPO("MlpPolicy", _target_env(), **{**SMALL, **kwargs})


def test_unknown_or_unfit_advantage_estimator_fails_at_construction():
    from sb3_grpo.plugins import UnknownNameError

    with pytest.raises(UnknownNameError, match=r"no_such_estimator.*Available: .*gae"):
        AdaptiveKLPPO("MlpPolicy", _target_env(), advantage_estimator="no_such_estimator", **SMALL)
    with pytest.raises(ValueError, match="AdaptiveKLPPO"):  # a group estimator needs group ids a critic algorithm lacks
        AdaptiveKLPPO("MlpPolicy", _target_env(), advantage_estimator="group_zscore", **SMALL)


def test_default_learn_budget_is_documented():
    assert inspect.signature(AdaptiveKLPPO.learn).parameters["total_timesteps"].default == 100_000
    assert "100,000" in AdaptiveKLPPO.learn.__doc__


# ---------------------------------------------------------------- convergence (slow, not run by default)


def _linear(initial):
    """rl-zoo's ``lin_<initial>`` schedule."""
    return lambda progress_remaining: progress_remaining * initial


@pytest.mark.slow
@pytest.mark.parametrize("clipped", [False, True])
def test_solves_cartpole_with_rl_zoo_ppo_hyperparameters(clipped):
    """rl-zoo's PPO CartPole-v1 config (lr lin_1e-3; clip_range lin_0.2 or the pure penalty), 100k steps."""
    env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
    model = AdaptiveKLPPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=_linear(1e-3),
        clip_range=_linear(0.2) if clipped else None,
        seed=0,
    )
    model.learn(100_000)
    mean_return, _ = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=4, seed=1), n_eval_episodes=20)
    assert mean_return >= 475, mean_return


def test_a_plain_sb3_rollout_buffer_class_keeps_the_old_distributions(tmp_path):
    """rollout_buffer_class=RolloutBuffer (with "gae"): the buffer is built from a subclass that stores the old
    distributions for the exact KL, while the model keeps (and saves) the class it was given."""
    from stable_baselines3.common.buffers import RolloutBuffer

    from sb3_grpo.adaptive_kl_ppo.buffers import OldDistributionMixin

    model = AdaptiveKLPPO(
        "MlpPolicy", "CartPole-v1", n_steps=32, batch_size=16, rollout_buffer_class=RolloutBuffer,
        policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    assert isinstance(model.rollout_buffer, RolloutBuffer) and isinstance(model.rollout_buffer, OldDistributionMixin)
    model.learn(64)
    assert model.rollout_buffer.old_distribution.shape == (32, 2)  # Categorical logits of each step
    model.save(tmp_path / "m.zip")
    loaded = AdaptiveKLPPO.load(tmp_path / "m.zip", env=model.env, device="cpu")
    assert loaded.rollout_buffer_class is RolloutBuffer
    loaded.learn(64)
    assert loaded.logger.name_to_value["train/kl"] > 0
