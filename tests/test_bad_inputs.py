"""Bad inputs, across the algorithms: each is a clear error that names the argument (or the env, function or
estimator at fault) and the fix, raised before any training step.

Audit of the issue's list (where each case is tested):

- invalid hyperparameters: here (the ones not already in the algorithm's own test file), and
  ``test_grpo_bad_inputs.py::test_bad_arguments_fail_before_any_step``, ``test_exact_trpo.py::test_refusals``,
  ``test_adaptive_kl_ppo.py::test_bad_arguments_fail_at_construction_naming_the_argument``;
- an observation or action space a policy cannot handle: here, every algorithm;
- an env whose seeded resets are not reproducible, an env that never ends an episode: GRPO only
  (``test_grpo_bad_inputs.py``), which needs both (group members replay one seeded start; a group needs whole
  trajectories). ExactTRPO and AdaptiveKLPPO never reseed the env and bootstrap unfinished episodes with the critic,
  so neither is an error for them;
- NaN or inf rewards or observations: GRPO in ``test_grpo_bad_inputs.py``; ExactTRPO and AdaptiveKLPPO here;
- a reward function (GRPO only) or an advantage estimator returning the wrong shape or NaN: here, in training
  (``test_estimators.py`` and ``test_reward_functions.py`` test the checks themselves);
- unknown plugin names: here, for every algorithm that takes them;
- a model loaded with an env whose spaces differ: GRPO in ``test_grpo_save_resume.py``; ExactTRPO and AdaptiveKLPPO
  here.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from envs import NaNObservationEnv, NaNRewardEnv, TargetEnv
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
from tiny_models import ALGORITHMS, CLASSES, CRITIC_ALGORITHMS, make_model

from sb3_grpo import AdvantageEstimator, AdvantageOutputs
from sb3_grpo.common.advantages import EstimatorError
from sb3_grpo.common.reward_scoring import RewardFunctionError
from sb3_grpo.plugins import UnknownNameError


class CountingEnv(TargetEnv):
    """TargetEnv that counts every ``step`` of every instance (class-wide)."""

    steps = 0

    def step(self, action):
        CountingEnv.steps += 1
        return super().step(action)


class InfRewardEnv(TargetEnv):
    """An inf reward on the fourth step."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, (float("inf") if self.t == 4 else reward), terminated, truncated, info


class NaNTerminalObservationEnv(TargetEnv):
    """The last observation of each episode (which the VecEnv keeps in ``terminal_observation``) is NaN."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if terminated:
            obs = np.full_like(obs, np.nan)
        return obs, reward, terminated, truncated, info


class TupleActionEnv(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3)))

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(2, dtype=np.float32), 0.0, True, False, {}


def _params(model):
    return [p.detach().clone() for p in model.policy.parameters()]


def _unchanged(model, before):
    return all(th.equal(a, b) for a, b in zip(before, _params(model), strict=True))


# ---------------------------------------------------------------- hyperparameters


BAD_ARGUMENTS = [
    # GRPO (group_size, beta, loss_type, ... are in test_grpo_bad_inputs.py)
    ("grpo", dict(beta=float("nan")), "beta must be a finite number >= 0"),
    ("grpo", dict(n_epochs=0), "GRPO: n_epochs must be an integer >= 1"),
    ("grpo", dict(gamma=1.01), r"gamma \(the discount factor\) must be in \[0, 1\]"),
    ("grpo", dict(gamma=float("nan")), r"gamma \(the discount factor\) must be in \[0, 1\]"),
    ("grpo", dict(batch_size=0), "batch_size must be >= 1 or None"),
    ("grpo", dict(target_kl=-0.01), "target_kl must be > 0 or None"),
    ("grpo", dict(max_trajectory_length=0), "max_trajectory_length must be >= 1"),
    ("grpo", dict(ent_coef=-0.1), "GRPO: ent_coef must be a number >= 0"),
    ("grpo", dict(group_size=4, branch_every=2), r"branch_every needs n_envs to be a multiple of group_size.*n_envs=4"),
    ("grpo", dict(max_grad_norm=-0.5), r"max_grad_norm .* must be a finite number > 0, got -0.5 \(a negative norm"),
    ("grpo", dict(max_grad_norm=0.0), r"max_grad_norm .* must be a finite number > 0, got 0.0"),
    # ExactTRPO (fisher_solver, cg_damping=0, fisher_subsample=1.5, target_kl=0 are in test_exact_trpo.py)
    ("exact_trpo", dict(target_kl=-0.01), "target_kl .*delta.* must be > 0"),
    ("exact_trpo", dict(gamma=-0.5), r"ExactTRPO: gamma \(the discount factor\) must be in \[0, 1\]"),
    ("exact_trpo", dict(gae_lambda=1.5), r"gae_lambda must be in \[0, 1\]"),
    ("exact_trpo", dict(fisher_solver="cg", cg_damping=-0.1), "cg_damping must be >= 0"),
    ("exact_trpo", dict(line_search_shrinking_factor=1.5), r"line_search_shrinking_factor must be in \(0, 1\)"),
    ("exact_trpo", dict(line_search_max_iter=0), "line_search_max_iter must be >= 1"),
    ("exact_trpo", dict(sub_sampling_factor=0), "sub_sampling_factor must be >= 1"),
    ("exact_trpo", dict(cg_max_steps=0), "cg_max_steps must be >= 1"),
    ("exact_trpo", dict(fisher_memory_budget=0), "fisher_memory_budget must be > 0"),
    ("exact_trpo", dict(fisher_subsample=0), "fisher_subsample must be"),
    ("exact_trpo", dict(batch_size=0), r"ExactTRPO: batch_size \(the critic's minibatch\) must be >= 1, got 0"),
    ("exact_trpo", dict(n_critic_updates=0), r"ExactTRPO: n_critic_updates \(critic epochs per update\) must be >= 1"),
    # AdaptiveKLPPO (kl_coef, target_kl, kl_estimator, ... are in test_adaptive_kl_ppo.py)
    ("adaptive_kl_ppo", dict(n_epochs=0), "n_epochs must be an integer >= 1"),
    ("adaptive_kl_ppo", dict(gamma=2.0), r"AdaptiveKLPPO: gamma \(the discount factor\) must be in \[0, 1\]"),
    ("adaptive_kl_ppo", dict(gae_lambda=-0.1), r"gae_lambda must be in \[0, 1\]"),
    ("adaptive_kl_ppo", dict(vf_coef=-1.0), "vf_coef must be a number >= 0"),
    ("adaptive_kl_ppo", dict(ent_coef=-0.01), "ent_coef must be a number >= 0"),
    ("adaptive_kl_ppo", dict(clip_range_vf=0.0), "clip_range_vf must be None, a number > 0"),
    ("adaptive_kl_ppo", dict(kl_coef=float("nan")), "kl_coef"),
    ("adaptive_kl_ppo", dict(max_grad_norm=-1.0), r"AdaptiveKLPPO: max_grad_norm .* must be a finite number > 0"),
    ("adaptive_kl_ppo", dict(max_grad_norm=0), r"AdaptiveKLPPO: max_grad_norm .* must be a finite number > 0, got 0"),
    # REINFORCE (baseline, baseline_decay, ... are in test_reinforce.py)
    ("reinforce", dict(gamma=-0.1), r"REINFORCE: gamma \(the discount factor\) must be in \[0, 1\]"),
    ("reinforce", dict(ent_coef=-0.01), "REINFORCE: ent_coef must be a number >= 0"),
    ("reinforce", dict(max_grad_norm=-1.0), r"REINFORCE: max_grad_norm must be None \(no clipping\) or a finite number > 0"),
    # OnlineDPO (beta, group_size, ref_update_interval, ... are in test_online_dpo.py)
    ("online_dpo", dict(n_epochs=0), "OnlineDPO: n_epochs must be an integer >= 1"),
    ("online_dpo", dict(gamma=1.01), r"OnlineDPO: gamma \(the discount factor\) must be in \[0, 1\]"),
    ("online_dpo", dict(batch_size=0), "OnlineDPO: batch_size must be >= 1 or None"),
    ("online_dpo", dict(ent_coef=-0.1), "OnlineDPO: ent_coef must be a number >= 0"),
    ("online_dpo", dict(max_grad_norm=-0.5), r"OnlineDPO: max_grad_norm .* must be a finite number > 0, got -0.5"),
]


@pytest.mark.parametrize("name, kwargs, match", BAD_ARGUMENTS, ids=[f"{a}-{next(iter(k))}" for a, k, _ in BAD_ARGUMENTS])
def test_invalid_hyperparameters_fail_at_construction_naming_the_argument(name, kwargs, match):
    CountingEnv.steps = 0
    with pytest.raises(ValueError, match=match):
        make_model(name, DummyVecEnv([CountingEnv, CountingEnv]), **kwargs)
    assert CountingEnv.steps == 0


STRING_NUMBERS = [
    ("grpo", dict(n_steps="64"), r"GRPO: n_steps must be an integer, got '64' \(a str\).*write n_steps=64"),
    ("grpo", dict(beta="0.04"), r"GRPO: beta must be a number, got '0.04' \(a str\).*write beta=0.04"),
    ("grpo", dict(groups_per_rollout="2"), r"GRPO: groups_per_rollout must be an integer or None, got '2'"),
    ("grpo", dict(clip_range="0.2"), r"GRPO: clip_range must be a number or a schedule .*, got '0.2'"),
    ("exact_trpo", dict(n_steps="64"), r"ExactTRPO: n_steps must be an integer, got '64'"),
    ("exact_trpo", dict(target_kl="0.01"), r"ExactTRPO: target_kl must be a number, got '0.01'"),
    ("exact_trpo", dict(batch_size=32.0), r"ExactTRPO: batch_size must be an integer, got 32.0 \(a float\)"),
    ("adaptive_kl_ppo", dict(n_steps="64"), r"AdaptiveKLPPO: n_steps must be an integer, got '64'"),
    ("adaptive_kl_ppo", dict(kl_coef="1.0"), r"AdaptiveKLPPO: kl_coef must be a number, got '1.0'"),
    ("adaptive_kl_ppo", dict(learning_rate="3e-4"), r"AdaptiveKLPPO: learning_rate must be a number or a schedule"),
    ("reinforce", dict(n_steps="64"), r"REINFORCE: n_steps must be an integer, got '64'"),
    ("reinforce", dict(baseline_decay="0.9"), r"REINFORCE: baseline_decay must be a number, got '0.9'"),
    ("online_dpo", dict(n_steps="64"), r"OnlineDPO: n_steps must be an integer, got '64'"),
    ("online_dpo", dict(beta="0.1"), r"OnlineDPO: beta must be a number, got '0.1'"),
]


@pytest.mark.parametrize("name, kwargs, match", STRING_NUMBERS, ids=[f"{a}-{next(iter(k))}" for a, k, _ in STRING_NUMBERS])
def test_a_number_given_as_a_string_is_named_with_the_type_expected(name, kwargs, match):
    """A quoted number in a zoo YAML file or in -params reaches the constructor as a string."""
    from sb3_grpo.common.arguments import ArgumentTypeError

    with pytest.raises(ArgumentTypeError, match=match) as info:
        make_model(name, **kwargs)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_clip_range_high_below_clip_range_warns():
    with pytest.warns(UserWarning, match=r"clip_range_high \(0.1\) is smaller than clip_range \(0.2\).*swap"):
        make_model("grpo", clip_range=0.2, clip_range_high=0.1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_model("grpo", clip_range=0.2, clip_range_high=0.28)  # DAPO's clip-higher: no warning


def test_a_learn_budget_that_whole_groups_overshoot_by_more_than_twice_warns_once_with_the_fix():
    """Episodes of 100 steps, 2 slots, groups of 2: a rollout holds at least 2 groups, i.e. 400 steps."""
    import warnings

    def overshoot_warnings(total_timesteps, **kwargs):
        model = make_model("grpo", DummyVecEnv([lambda: TargetEnv(length=100)] * 2), n_steps=8, n_epochs=1, **kwargs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.learn(total_timesteps)
        return model.num_timesteps, [str(w.message) for w in caught if "twice the steps asked for" in str(w.message)]

    steps, messages = overshoot_warnings(20)
    assert steps == 400 and len(messages) == 1, messages
    assert "learn(total_timesteps=20) will run more than twice the steps asked for" in messages[0]
    assert all(name in messages[0] for name in ("groups_per_rollout", "group_size", "n_envs"))
    assert overshoot_warnings(400) == (400, [])  # one rollout, as asked
    assert overshoot_warnings(200, groups_per_rollout=1) == (200, [])


class TupleObservationEnv(gym.Env):
    observation_space = spaces.Tuple((spaces.Box(-1.0, 1.0, (2,), dtype=np.float32), spaces.Discrete(2)))
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return (np.zeros(2, dtype=np.float32), 0), {}

    def step(self, action):
        return (np.zeros(2, dtype=np.float32), 0), 0.0, True, False, {}


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_tuple_observation_space_is_refused_at_construction(name):
    with pytest.raises(NotImplementedError, match=r"Tuple\(.*\) observation space is not supported"):
        make_model(name, DummyVecEnv([TupleObservationEnv]))


@pytest.mark.filterwarnings("ignore:You have specified a mini-batch size")  # sb3-contrib's own, before ours
@pytest.mark.parametrize(
    "name, match",
    [
        ("exact_trpo", r"ExactTRPO: batch_size .* larger than the rollout, n_steps \* n_envs = 16 \* 2 = 32.*<= 32"),
        ("adaptive_kl_ppo", r"AdaptiveKLPPO: batch_size \(64\) is larger than the rollout.*= 32.*<= 32"),
    ],
)
def test_batch_size_larger_than_the_rollout_warns_with_the_fix(name, match):
    """A warning, not an error: SB3's PPO and sb3-contrib's TRPO accept it (one minibatch per epoch), and rl-zoo
    configs and samplers rely on that."""
    with pytest.warns(UserWarning, match=match):
        make_model(name, batch_size=64).learn(32)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_an_action_space_no_policy_can_handle_is_refused_naming_it(name):
    with pytest.raises(AssertionError, match=r"only supports .* as action spaces but Tuple"):
        make_model(name, DummyVecEnv([TupleActionEnv]))


class SampledStartEnv(TargetEnv):
    """SB3's test envs' pattern: reset() samples the observation space, which the reset seed does not seed, so two
    resets with one seed start from different states."""

    def __init__(self, length=5):
        super().__init__(length=length)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed, options=options)
        return self.observation_space.sample(), {}


class SeededSampledStartEnv(SampledStartEnv):
    """The fix the message gives: seed the space from the reset seed."""

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.observation_space.seed(seed)
        return super().reset(seed=seed, options=options)


def test_a_non_reproducible_reset_is_refused_as_the_group_starts_naming_the_env_and_the_fix():
    model = make_model("grpo", DummyVecEnv([lambda: SampledStartEnv(1000)] * 2), n_steps=64)
    match = (
        r"different observations \(env of class (tests\.)?test_bad_inputs\.SampledStartEnv, group 0: trajectories 0 and 1\)"
        r".*super\(\)\.reset\(seed=seed\).*self\.np_random.*self\.observation_space\.seed\(seed\).*verify_group_starts=False"
    )
    from sb3_grpo.grpo import NonReproducibleResetError

    with pytest.raises(NonReproducibleResetError, match=match):
        model.learn(64)
    assert model.num_timesteps == 0  # at the group's first reset, not after a rollout of 4 episodes of 1000 steps

    make_model("grpo", DummyVecEnv([SeededSampledStartEnv, SeededSampledStartEnv]), n_epochs=1).learn(20)
    make_model("grpo", DummyVecEnv([SampledStartEnv, SampledStartEnv]), n_epochs=1, verify_group_starts=False).learn(20)


# ---------------------------------------------------------------- non-finite env outputs


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # VecNormalize's statistics of an inf reward
@pytest.mark.parametrize("normalized", [False, True], ids=["raw", "vecnormalize"])
@pytest.mark.parametrize(
    "env_cls, match",
    [
        (NaNRewardEnv, r"Env 1 \(its index in the VecEnv\) returned a non-finite reward \(nan\) at step 3 of its episode"),
        (InfRewardEnv, r"Env 1 .* non-finite reward \(inf\) at step 4 of its episode"),
        (NaNObservationEnv, r"Env 1 .* non-finite observation \(NaN or inf\) at step 2 of its episode.*VecCheckNan"),
        (NaNTerminalObservationEnv, r"Env 1 .* non-finite terminal observation .* at step 5 of its episode"),
    ],
    ids=["nan_reward", "inf_reward", "nan_observation", "nan_terminal_observation"],
)
@pytest.mark.parametrize("name", CRITIC_ALGORITHMS)
def test_non_finite_env_output_names_the_env_and_step_before_any_update(name, env_cls, match, normalized):
    env = DummyVecEnv([TargetEnv, env_cls])
    if normalized:  # the check sees the env's own values, not the normalised (clipped) ones
        env = VecNormalize(env)
    model = make_model(name, env)
    before = _params(model)
    with pytest.raises(ValueError, match=match):
        model.learn(64)
    assert model._n_updates == 0 and _unchanged(model, before)


class NaNResetEnv(TargetEnv):
    """Every observation from reset is NaN (``after_an_episode``: only once an episode has ended)."""

    def __init__(self, after_an_episode=False):
        super().__init__()
        self.after_an_episode, self.ended = after_an_episode, False

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return (np.full_like(obs, np.nan) if self.ended or not self.after_an_episode else obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.ended = self.ended or terminated or truncated
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize("normalized", [False, True], ids=["raw", "vecnormalize"])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_non_finite_reset_observation_is_named_as_one_before_any_step(name, normalized):
    """The very first observation (from reset) is checked too, and the message says it came from reset()."""
    env = DummyVecEnv([TargetEnv, NaNResetEnv])
    if normalized:
        env = VecNormalize(env)
    model = make_model(name, env)
    slot = r"Env 1 \(its index in the VecEnv\)"
    with pytest.raises(ValueError, match=rf"{slot} returned a non-finite observation \(NaN or inf\) from reset\(\), the "):
        model.learn(64)
    assert model.num_timesteps == 0


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_non_finite_observation_from_an_automatic_reset_is_named_as_one(name):
    env = DummyVecEnv([TargetEnv, lambda: NaNResetEnv(after_an_episode=True)])  # episodes of 5 steps
    model = make_model(name, env)
    match = r"non-finite observation \(NaN or inf\) from reset\(\), the first observation of a new episode \(after step 5"
    with pytest.raises(ValueError, match=match):
        model.learn(64)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_custom_training_loop_runs_and_keeps_the_checks(name):
    """SB3's own tests and custom loops call ``_setup_learn`` then ``collect_rollouts`` (and ``train``) directly."""
    model = make_model(name)
    _, callback = model._setup_learn(total_timesteps=200)
    for _ in range(2):
        assert model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=model.n_steps)
        model.train()
    assert model.num_timesteps >= 2 * model.n_steps * model.env.num_envs

    model = make_model(name, DummyVecEnv([TargetEnv, NaNObservationEnv]))
    _, callback = model._setup_learn(total_timesteps=200)
    slot = "Env 1"
    with pytest.raises(ValueError, match=rf"{slot} .*non-finite observation \(NaN or inf\) at step 2 of its episode"):
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=model.n_steps)


@pytest.mark.parametrize("name", CRITIC_ALGORITHMS)
def test_the_episode_step_counts_on_across_learn_calls(name):
    class LateNaN(TargetEnv):
        """NaN reward at the 7th step of an episode of 10; the first learn call stops after step 4."""

        def __init__(self):
            super().__init__(length=10)

        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, (float("nan") if self.t == 7 else reward), terminated, truncated, info

    model = make_model(name, DummyVecEnv([LateNaN]), n_steps=4, batch_size=4)
    model.learn(4)
    with pytest.raises(ValueError, match=r"Env 0 .* non-finite reward \(nan\) at step 7 of its episode"):
        model.learn(8, reset_num_timesteps=False)


@pytest.mark.filterwarnings("error")  # no overflow warning from the fast path either
def test_the_per_step_check_passes_huge_finite_values_and_names_every_kind_of_non_finite_one():
    from sb3_grpo.common.rollout_checks import check_finite_step

    steps, dones = np.array([3, 9]), np.array([False, True])
    huge32 = np.full((2, 3), np.finfo(np.float32).max, dtype=np.float32)  # a float32 sum would overflow to inf
    huge64 = np.full((2, 3), 1e300)
    for obs in (huge32, huge64, {"a": huge32, "b": np.ones((2, 2), dtype=np.int64)}, np.ones((2, 1), dtype=np.complex64)):
        check_finite_step(obs, np.array([1.0, 2.0]), [{}, {"terminal_observation": np.ones(3)}], steps, dones)
    with pytest.raises(ValueError, match=r"Env 1 .* non-finite observation \(key 'a'\) .* at step 9"):
        bad = huge32.copy()
        bad[1, 2] = np.inf
        check_finite_step({"a": bad}, np.zeros(2), [{}, {}], steps, np.zeros(2, dtype=bool))
    with pytest.raises(ValueError, match=r"Env 0 .* non-finite observation .* at step 3"):
        check_finite_step(np.array([[np.nan + 1j], [1j]]), np.zeros(2), [{}, {}], steps, None)
    with pytest.raises(ValueError, match=r"Env 1 .* non-finite terminal observation .* at step 9"):
        check_finite_step(huge64, np.zeros(2), [{}, {"terminal_observation": np.array([np.nan])}], steps, dones)
    check_finite_step(huge64, np.zeros(2), [{}, {"terminal_observation": np.array([np.nan])}], steps, ~dones)  # not done


# ---------------------------------------------------------------- estimators and reward functions


class NaNCriticEstimator(AdvantageEstimator):
    requires = frozenset({"values", "step_rewards"})

    def compute(self, inputs):
        advantages = np.zeros(inputs.shape)
        advantages[1, 0] = np.nan
        return AdvantageOutputs(advantages=advantages, returns=np.zeros(inputs.shape))


class FlatCriticEstimator(AdvantageEstimator):
    requires = frozenset({"values", "step_rewards"})

    def compute(self, inputs):
        return AdvantageOutputs(advantages=np.zeros(inputs.shape[0]), returns=np.zeros(inputs.shape))


class NaNGroupEstimator(AdvantageEstimator):
    requires = frozenset({"outcome_rewards", "group_ids"})

    def compute(self, inputs):
        return AdvantageOutputs(advantages=inputs.broadcast(np.full(inputs.shape[1], np.nan)))


class FlatGroupEstimator(AdvantageEstimator):
    requires = frozenset({"outcome_rewards", "group_ids"})

    def compute(self, inputs):
        return AdvantageOutputs(advantages=np.zeros(inputs.shape[1]))


@pytest.mark.parametrize(
    "name, estimator, match",
    [
        ("grpo", NaNGroupEstimator, r"'NaNGroupEstimator' returned a non-finite advantage"),
        ("grpo", FlatGroupEstimator, r"'FlatGroupEstimator' returned advantages of shape"),
        ("exact_trpo", NaNCriticEstimator, r"'NaNCriticEstimator' returned a non-finite advantage \(nan\) at step 1"),
        ("exact_trpo", FlatCriticEstimator, r"'FlatCriticEstimator' returned advantages of shape \(16,\); expected \(16, 2\)"),
        ("adaptive_kl_ppo", NaNCriticEstimator, r"'NaNCriticEstimator' returned a non-finite advantage"),
        ("adaptive_kl_ppo", FlatCriticEstimator, r"'FlatCriticEstimator' returned advantages of shape"),
    ],
)
def test_a_broken_estimator_is_named_before_any_update(name, estimator, match):
    model = make_model(name, advantage_estimator=estimator)
    before = _params(model)
    with pytest.raises(EstimatorError, match=match):
        model.learn(64)
    assert model._n_updates == 0 and _unchanged(model, before)


class FailsOnSecondCall(AdvantageEstimator):
    """Works once (the first update happens), then raises: a plugin's bug that shows up mid-training."""

    def __init__(self, inner_name):
        from sb3_grpo import get_advantage_estimator

        self.inner = get_advantage_estimator(inner_name)
        self.requires = self.inner.requires
        self.calls = 0

    def compute(self, inputs):
        self.calls += 1
        if self.calls > 1:
            raise ZeroDivisionError("plugin bug")
        return self.inner.compute(inputs)


@pytest.mark.parametrize("name, inner", [("grpo", "group_zscore"), ("exact_trpo", "gae"), ("adaptive_kl_ppo", "gae")])
def test_a_plugin_estimator_that_raises_mid_training_names_itself(name, inner):
    from sb3_grpo import register_advantage_estimator, unregister_advantage_estimator

    register_advantage_estimator("flaky_plugin_estimator", FailsOnSecondCall(inner))
    try:
        model = make_model(name, advantage_estimator="flaky_plugin_estimator")
        match = r"'flaky_plugin_estimator' \(registered in-process\) raised: ZeroDivisionError\('plugin bug'\)"
        with pytest.raises(EstimatorError, match=match) as info:
            model.learn(10_000)
        assert model._n_updates >= 1  # it failed mid-training, not at the start
        assert isinstance(info.value.__cause__, ZeroDivisionError)  # the plugin's own traceback is kept
    finally:
        unregister_advantage_estimator("flaky_plugin_estimator")


def test_an_entry_point_style_plugin_that_raises_is_named_with_its_plugin():
    from sb3_grpo import get_advantage_estimator, hookimpl
    from sb3_grpo.common.advantages import AdvantageInputs, run_estimator
    from sb3_grpo.plugins import register_plugin, unregister_plugin

    flaky = FailsOnSecondCall("group_zscore")  # built outside the hook: the registry is loading inside it

    class BrokenPlugin:
        @hookimpl
        def register_advantage_estimators(self, register):
            register("always_raises", flaky)

    name = register_plugin(BrokenPlugin(), name="sb3-grpo-broken-example")
    try:
        estimator = get_advantage_estimator("always_raises")
        inputs = AdvantageInputs.from_trajectories([np.ones(2), np.zeros(2)], gamma=0.9, group_ids=np.array([0, 0]))
        run_estimator(estimator, inputs)  # the first call works
        match = r"'always_raises' \(registered by plugin 'sb3-grpo-broken-example'\) raised: ZeroDivisionError"
        with pytest.raises(EstimatorError, match=match):
            run_estimator(estimator, inputs)
    finally:
        unregister_plugin(name)


def nan_reward(trajectory):
    return float("nan")


def two_rewards(trajectory):
    return np.zeros(2) if trajectory.length != 2 else np.zeros(3)


@pytest.mark.parametrize(
    "fn, match",
    [
        (nan_reward, r"Reward function 'nan_reward' returned a non-finite value"),
        (two_rewards, r"'two_rewards' returned shape"),
    ],
)
def test_a_broken_reward_function_is_named_before_any_update(fn, match):
    model = make_model("grpo", reward_functions=[fn])
    before = _params(model)
    with pytest.raises(RewardFunctionError, match=match):
        model.learn(64)
    assert model._n_updates == 0 and _unchanged(model, before)


# ---------------------------------------------------------------- plugin names, loading


# REINFORCE takes a baseline instead (test_reinforce.py); OnlineDPO scores preference pairs, with no estimator
@pytest.mark.parametrize("name", [name for name in ALGORITHMS if name not in ("reinforce", "online_dpo")])
def test_unknown_advantage_estimator_lists_what_exists(name):
    with pytest.raises(UnknownNameError, match=r"no_such_estimator.*Available: .*(gae|group_zscore)"):
        make_model(name, advantage_estimator="no_such_estimator")


def test_unknown_reward_function_lists_what_exists():
    with pytest.raises(UnknownNameError, match=r"no_such_reward.*episodic_return"):
        make_model("grpo", reward_functions=["episodic_return", "no_such_reward"])


@pytest.mark.parametrize("name", CRITIC_ALGORITHMS)
@pytest.mark.parametrize("other", ["observation", "action"])
def test_loading_with_an_env_whose_spaces_differ_is_refused(name, other, tmp_path):
    model = make_model(name)
    model.save(tmp_path / "m.zip")
    if other == "observation":
        env, match = DummyVecEnv([lambda: gym.make("CartPole-v1")]), "Observation spaces do not match"
    else:
        env, match = DummyVecEnv([lambda: TargetEnv("multidiscrete")]), "Action spaces do not match"
    with pytest.raises(ValueError, match=match):
        CLASSES[name].load(tmp_path / "m.zip", env=env, device="cpu")
