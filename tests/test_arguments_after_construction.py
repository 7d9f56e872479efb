"""What a user changes after construction, across the five algorithms: an argument given to ``load`` (keyword or
``custom_objects``) or set by hand meets the constructor's checks; a schedule is checked where it is applied; the
policy arguments, ``predict``'s observation and a model without an env are named; a rollout without signal, a
REINFORCE rollout that never ends and a save after a callback stopped ``learn`` say what they are.
"""

import hashlib
import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv
from tiny_models import ALGORITHMS, CLASSES, make_model, tiny_env

from sb3_grpo import GRPO, REINFORCE
from sb3_grpo.common.arguments import ArgumentTypeError

WITH_EPOCHS = ["grpo", "adaptive_kl_ppo", "reinforce", "online_dpo"]


def _params(model):
    return [p.detach().clone() for p in model.policy.parameters()]


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def saved(tmp_path):
    def save(name):
        path = tmp_path / f"{name}.zip"
        make_model(name).save(path)
        return path

    return save


# ---------------------------------------------------------------- arguments that reach a model after construction

LOAD_CASES = [
    *[(name, "kwargs", dict(gamma=1.5), r"gamma \(the discount factor\) must be in \[0, 1\], got 1.5") for name in ALGORITHMS],
    *[(name, "custom_objects", dict(gamma=-0.1), r"gamma .* must be in \[0, 1\], got -0.1") for name in ALGORITHMS],
    *[(name, "kwargs", dict(n_epochs=0), r"n_epochs must be an integer >= 1, got 0") for name in WITH_EPOCHS],
    ("grpo", "custom_objects", dict(max_grad_norm=-0.5), r"max_grad_norm .* must be a finite number > 0, got -0.5"),
    ("adaptive_kl_ppo", "kwargs", dict(max_grad_norm=-0.5), r"max_grad_norm .* must be a finite number > 0, got -0.5"),
    ("online_dpo", "kwargs", dict(beta=-0.1), r"beta \(the DPO temperature\) must be a finite number > 0, got -0.1"),
    ("grpo", "kwargs", dict(beta=-0.1), r"beta must be a finite number >= 0"),
    ("grpo", "kwargs", dict(kl_estimator="k4"), r"kl_estimator must be one of \('k1', 'k2', 'k3', 'k3\+'\), got 'k4'"),
    ("grpo", "custom_objects", dict(top_entropy_quantile=0.0), r"top_entropy_quantile must be in \(0, 1\]"),
    ("grpo", "kwargs", dict(kl_in_reward="yes"), r"kl_in_reward must be True .* or False .*, got 'yes'"),
    ("grpo", "kwargs", dict(kl_target=0.01), r"kl_target adapts beta by a factor per update, which cannot move beta=0.0"),
    ("grpo", "custom_objects", dict(kl_horizon=0), r"kl_horizon must be a finite number > 0 .* got 0"),
    ("grpo", "kwargs", dict(ref_mixup_alpha=1.5), r"ref_mixup_alpha must be a number in \(0, 1\] .* got 1.5"),
    ("online_dpo", "custom_objects", dict(ref_mixup_alpha=0.0), r"ref_mixup_alpha must be a number in \(0, 1\]"),
    ("exact_trpo", "kwargs", dict(target_kl=0.0), r"target_kl .* must be > 0, got 0.0"),
    ("reinforce", "custom_objects", dict(baseline_decay=1.0), r"baseline_decay must be in \[0, 1\), got 1.0"),
    *[
        (name, "kwargs", dict(learning_rate=-1e-3), r"learning_rate must be a finite number >= 0, got -0.001 \(a negative")
        for name in ALGORITHMS
    ],
    *[
        (name, "kwargs", dict(stats_window_size=0), r"stats_window_size must be an integer >= 1 .* got 0")
        for name in ALGORITHMS
    ],
    *[(name, "kwargs", dict(seed="1"), r"seed must be an integer or None, got '1' \(a str\)") for name in ALGORITHMS],
    ("grpo", "kwargs", dict(clip_range="0.2"), r"clip_range must be a number or a schedule .* got '0.2' \(a str\)"),
    ("grpo", "custom_objects", dict(kl_horizon="1e4"), r"kl_horizon must be a (real )?number"),
]


@pytest.mark.parametrize("name, how, bad, match", LOAD_CASES)
def test_an_argument_given_to_load_meets_the_constructors_checks_and_the_file_is_kept(saved, name, how, bad, match):
    cls = CLASSES[name]
    path = saved(name)
    before = _digest(path)
    given = dict(custom_objects=bad) if how == "custom_objects" else bad
    with pytest.raises(ValueError, match=match + r".*\(an argument given to load\(\) or stored in the file\)"):
        cls.load(path, env=tiny_env(), device="cpu", **given)
    assert _digest(path) == before  # nothing the user saved is touched
    cls.load(path, env=tiny_env(), device="cpu").learn(32)  # and the file still loads and trains


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_misspelt_argument_given_to_load_is_refused_and_the_file_is_kept(saved, name):
    """SB3's ``load`` sets any keyword as an attribute: ``learnig_rate`` would be set where nothing reads it and the
    model would train with the saved learning rate. An argument the algorithm does not take is refused, with the
    nearest one it does; arguments it takes load as before."""
    cls = CLASSES[name]
    path = saved(name)
    before = _digest(path)
    misspelt = r"load\(\) got the keyword argument 'learnig_rate', which .* does not take .* Did you mean 'learning_rate'\?"
    with pytest.raises(ValueError, match=misspelt):
        cls.load(path, env=tiny_env(), device="cpu", learnig_rate=1e-4)
    with pytest.raises(ValueError, match=r"the keyword argument 'clip_rnage'"):
        cls.load(path, env=tiny_env(), device="cpu", custom_objects=None, clip_rnage=0.1)
    assert _digest(path) == before
    model = cls.load(path, env=tiny_env(), device="cpu", learning_rate=1e-4)
    assert model.learning_rate == 1e-4
    model.learn(32)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_stats_window_size_given_to_load_sizes_the_episode_statistics(saved, name):
    """SB3 keeps the window as ``_stats_window_size``: given to ``load`` under its constructor name it reaches the
    window, and the saved episodes go on in windows of the new size (also when ``learn`` does not reset them)."""
    model = make_model(name)
    model.learn(32)
    model.ep_info_buffer.extend({"r": float(i), "l": 5, "t": 0.0} for i in range(10))  # as a Monitor would report
    path = saved(name)
    model.save(path)
    loaded = CLASSES[name].load(path, env=tiny_env(), device="cpu", stats_window_size=3)
    assert loaded._stats_window_size == 3 and loaded.ep_info_buffer.maxlen == 3
    assert list(loaded.ep_info_buffer) == list(model.ep_info_buffer)[-3:]
    loaded.learn(32, reset_num_timesteps=False)
    assert loaded.ep_info_buffer.maxlen == 3 and not hasattr(loaded, "stats_window_size")


def test_an_estimator_option_of_the_wrong_type_names_the_estimator_and_the_quotes():
    with pytest.raises(
        TypeError,
        match=r"'group_step_baseline' could not be built with advantage_kwargs \{'lam': '0.9'\}: .* lam: a number in quotes",
    ):
        make_model("grpo", advantage_estimator="group_step_baseline", advantage_kwargs={"lam": "0.9"})


@pytest.mark.parametrize("name", ALGORITHMS)
def test_an_argument_set_by_hand_is_checked_when_learn_starts(name):
    model = make_model(name)
    model.gamma = 2.0
    with pytest.raises(ValueError, match=r"gamma .* must be in \[0, 1\], got 2.0 \(an argument set after construction\)"):
        model.learn(32)


@pytest.mark.parametrize("name", WITH_EPOCHS)
def test_a_wrong_type_set_by_hand_is_an_argument_type_error(name):
    model = make_model(name)
    model.n_epochs = "3"
    with pytest.raises(ValueError, match=r"n_epochs must be an integer >= 1, got '3' \(an argument set after construction\)"):
        model.learn(32)


# ---------------------------------------------------------------- schedules, checked where they are applied


def turns_negative(progress):
    return 1e-3 * (progress - 0.5)


def turns_nan(progress):
    return 1e-3 if progress > 0.5 else math.nan


@pytest.mark.parametrize("schedule, value", [(turns_negative, r"-\d"), (turns_nan, "nan")])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_learning_rate_schedule_that_turns_bad_late_is_named_before_it_is_applied(name, schedule, value):
    model = make_model(name, learning_rate=schedule)
    applied = []
    original = model.policy.optimizer.step

    def step(*args, **kwargs):
        applied.append(model.policy.optimizer.param_groups[0]["lr"])
        return original(*args, **kwargs)

    model.policy.optimizer.step = step
    with pytest.raises(ValueError, match=rf"learning_rate = .*{schedule.__name__} gave {value}.* at remaining progress"):
        model.learn(400)
    assert all(lr >= 0 and math.isfinite(lr) for lr in applied)  # no ascent step and no NaN step was ever taken


@pytest.mark.parametrize("name", ["grpo", "adaptive_kl_ppo"])
def test_a_clip_range_schedule_that_turns_negative_is_named(name):
    model = make_model(name, clip_range=lambda progress: progress - 0.5)
    with pytest.raises(ValueError, match=r"clip_range = .*<lambda> gave -"):
        model.learn(400)


# ---------------------------------------------------------------- policy arguments


@pytest.mark.parametrize("name", ALGORITHMS)
def test_an_activation_given_by_name_is_refused_with_the_class_to_write(name):
    with pytest.raises(ArgumentTypeError, match=r"activation_fn.*got 'tanh'\. Write activation_fn=torch\.nn\.Tanh"):
        make_model(name, policy_kwargs=dict(activation_fn="tanh"))


@pytest.mark.parametrize("net_arch", [[0], [16, 0], dict(pi=[16], vf=[0]), dict(pi=[0])])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_layer_of_no_units_is_refused(name, net_arch):
    with pytest.raises(ValueError, match=r"policy_kwargs\['net_arch'\] = .* has layer size\(s\) \[0\]"):
        make_model(name, policy_kwargs=dict(net_arch=net_arch))


@pytest.mark.parametrize("name", ["grpo", "reinforce", "online_dpo"])
def test_the_value_layers_of_an_actor_only_policy_are_ignored_without_naming_another_algorithm(name):
    with pytest.warns(UserWarning, match="no value network") as record:
        make_model(name, policy_kwargs=dict(net_arch=dict(pi=[16], vf=[16])))
    assert not any("GRPO" in str(w.message) for w in record)


# ---------------------------------------------------------------- predict and learn


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_predict_names_a_non_finite_observation(name, bad):
    model = make_model(name)
    obs = np.zeros(4, dtype=np.float32)
    obs[2] = bad
    with pytest.raises(ValueError, match=rf"predict: the observation holds {bad!r} at index \(2,\)"):
        model.predict(obs)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_learning_a_model_loaded_without_env_says_how_to_give_one(saved, name):
    model = CLASSES[name].load(saved(name), device="cpu")
    with pytest.raises(ValueError, match=r"no env to learn from .*set_env\(env\)"):
        model.learn(32)


# ---------------------------------------------------------------- rollouts without signal


def constant_reward(trajectory):
    return 1.0


@pytest.mark.parametrize("name", ["grpo", "online_dpo"])
def test_rollouts_without_signal_warn_once_naming_the_cause(name):
    model = make_model(name, reward_functions=[constant_reward])
    before = _params(model)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model.learn(200)  # several rollouts
    said = [w for w in record if "no signal in the last 3 rollouts" in str(w.message)]
    assert len(said) == 1
    assert "every trajectory scored" in str(said[0].message) and "reward_functions=" in str(said[0].message)
    assert all(th.equal(a, b) for a, b in zip(before, _params(model), strict=True))


@pytest.mark.parametrize("name", ["grpo", "online_dpo"])
def test_the_terminal_reward_on_cartpole_has_no_signal_and_says_so(name):
    model = CLASSES[name](
        "MlpPolicy", "CartPole-v1", n_steps=32, group_size=2, reward_functions=["terminal_reward"], seed=0, device="cpu"
    )
    with pytest.warns(UserWarning, match=r"no signal .*every trajectory scored 1 \(reward functions \['terminal_reward'\]"):
        model.learn(600)


@pytest.mark.parametrize("name", ["grpo", "online_dpo"])
def test_a_solved_survival_task_is_not_called_a_reward_without_signal(name):
    # every episode runs to the 5-step time limit (CartPole cannot fall sooner) and scores 5: the groups compare
    # equal because the task is solved, which is no reason to blame the reward functions
    env = DummyVecEnv([lambda: gym.make("CartPole-v1", max_episode_steps=5) for _ in range(2)])
    model = CLASSES[name]("MlpPolicy", env, n_steps=16, group_size=2, seed=0, device="cpu")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model.learn(400)
    assert model.rollout_buffer.stats["train/zero_std_group_fraction"] == 1
    assert not [w for w in record if "no signal" in str(w.message)]


def test_grpo_on_the_arithmetic_env_scored_by_its_zero_env_reward_says_which_reward_functions_to_pass():
    env = DummyVecEnv([lambda: gym.make("sb3_grpo/Arithmetic-v0") for _ in range(2)])
    model = GRPO(
        "MlpPolicy", env, n_steps=16, group_size=2, reward_functions=["episodic_return"], policy_kwargs=dict(net_arch=[8]),
        seed=0, device="cpu",
    )  # fmt: skip
    with pytest.warns(UserWarning, match=r"no signal .*'episodic_return'.*arithmetic_exact_match"):
        model.learn(100)


@pytest.mark.parametrize("name", ["grpo", "online_dpo"])
def test_members_that_act_alike_are_not_called_a_reward_without_signal(name):
    # a policy mean far beyond Pendulum's bounds [-2, 2]: every sampled action clips to 2, so the members of a group
    # (one start state) go through the same states and score alike; the reward functions are not to blame
    env = DummyVecEnv([lambda: gym.make("Pendulum-v1", max_episode_steps=8)])  # groups from different start states
    model = CLASSES[name]("MlpPolicy", env, n_steps=64, group_size=2, learning_rate=0.0, seed=0, device="cpu")
    with th.no_grad():
        model.policy.action_net.weight.zero_()
        model.policy.action_net.bias.fill_(100.0)
    with pytest.warns(UserWarning, match=r"no signal .*went through the same observations.*beyond the action space") as record:
        model.learn(64 * 5)
    assert not any("reward_functions=" in str(w.message) for w in record)


def test_a_rollout_with_signal_does_not_warn():
    model = make_model("grpo")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model.learn(100)


# ---------------------------------------------------------------- REINFORCE on episodes that never end


class EndlessEnv(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(2, dtype=np.float32), 0.0, False, False, {}


def test_reinforce_warns_at_twice_its_budget_when_no_episode_ends():
    model = REINFORCE("MlpPolicy", EndlessEnv(), n_steps=16, max_episode_length=500, policy_kwargs=dict(net_arch=[8]))
    with (
        pytest.warns(UserWarning, match=r"REINFORCE: learn\(total_timesteps=50\) will run more than twice.*TimeLimit"),
        pytest.raises(RuntimeError, match="max_episode_length=500"),
    ):
        model.learn(50)
    assert model.num_timesteps > 100  # the warning came when the run passed 2 x 50, long before the error


# ---------------------------------------------------------------- a save after a callback stopped learn


class StopAfter(BaseCallback):
    def __init__(self, calls):
        super().__init__()
        self.calls = calls

    def _on_step(self):
        self.calls -= 1
        return self.calls > 0


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_save_after_a_callback_stopped_learn_describes_the_model(tmp_path, name):
    model = make_model(name)
    model.learn(1000, callback=StopAfter(30))
    assert 0 < model.num_timesteps < 1000
    model.save(tmp_path / "stopped.zip")
    loaded = CLASSES[name].load(tmp_path / "stopped.zip", env=tiny_env(), device="cpu")
    assert loaded.num_timesteps == model.num_timesteps
    for key in ("_group_counter",):
        if hasattr(model, key):
            assert getattr(loaded, key) == getattr(model, key)


def test_beta_changed_across_zero_at_load_or_by_hand_keeps_the_reference_policy_consistent(tmp_path):
    """A file saved without a reference policy (beta=0) loaded with beta > 0 takes the loaded policy as reference; a
    file's reference is dropped where beta=0 is given to load; beta set above 0 by hand makes the current policy the
    reference, so the KL term trains (it was silently skipped)."""
    without = make_model("grpo")
    without.learn(40)
    without.save(tmp_path / "without.zip")
    loaded = GRPO.load(tmp_path / "without.zip", env=tiny_env(), beta=0.04, device="cpu")
    assert all(th.equal(a, b) for a, b in zip(loaded.ref_policy.parameters(), loaded.policy.parameters(), strict=True))
    loaded.learn(40)
    with_reference = make_model("grpo", beta=0.04)
    with_reference.learn(40)
    with_reference.save(tmp_path / "with.zip")
    dropped = GRPO.load(tmp_path / "with.zip", env=tiny_env(), beta=0.0, device="cpu")
    assert dropped.ref_policy is None
    dropped.learn(40)
    without.beta = 0.04
    without.learn(40)
    assert without.ref_policy is not None and without.logger.name_to_value["train/kl_ref"] >= 0
