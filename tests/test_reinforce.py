"""REINFORCE: reward-to-go and baselines by hand, episodes carried across rollouts, the gradient, spaces, save/load."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_grpo.common.advantages import EstimatorError
from sb3_grpo.reinforce import REINFORCE
from sb3_grpo.reinforce.episodes import episode_batch
from sb3_grpo.reinforce.reinforce import EpisodeBuffer, RewardToGoBaseline, reward_to_go


class CountingEnv(gym.Env):
    """Episodes of ``length`` steps; the reward of step t (0-based) is ``t + 1``; observation: the step index."""

    def __init__(self, length=3):
        self.length = length
        self.observation_space = spaces.Box(0, 100, (1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], dtype=np.float32), float(self.t), self.t >= self.length, False, {}


class Batches(BaseCallback):
    """Keeps the batch each rollout hands to the update."""

    def __init__(self):
        super().__init__()
        self.batches = []

    def _on_step(self):
        return True

    def _on_rollout_end(self):
        self.batches.append(self.model.rollout_buffer.batch)


def test_reward_to_go_by_hand():
    np.testing.assert_allclose(reward_to_go(np.array([1.0, 2.0, 3.0]), 0.5), [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3])
    np.testing.assert_allclose(reward_to_go(np.array([1.0, 1.0, 1.0, 1.0]), 1.0), [4, 3, 2, 1])
    np.testing.assert_allclose(reward_to_go(np.array([5.0]), 0.9), [5])
    # time-major columns padded to the longest (the trajectory layout): each column as its own episode, 0 on padding
    columns = np.array([[1.0, 5.0], [2.0, 7.0], [3.0, 9.0]])
    valid = np.array([[True, True], [True, False], [True, False]])
    np.testing.assert_array_equal(
        reward_to_go(columns, 0.5, valid), np.stack([reward_to_go(columns[:, 0], 0.5), [5.0, 0.0, 0.0]], axis=1)
    )


def test_baselines_by_hand():
    batches = [np.array([1.0, 3.0]), np.array([10.0]), np.array([4.0, 4.0, 7.0])]  # means 2, 10, 5
    expected = {
        "none": [0.0, 0.0, 0.0],
        "batch_mean": [2.0, 10.0, 5.0],
        # b_1 = mean_1 = 2; then b <- 0.5 b + 0.5 mean: 0.5*2 + 0.5*2 = 2; 0.5*2 + 0.5*10 = 6
        "moving_average": [2.0, 2.0, 6.0],
    }
    for name, values in expected.items():
        estimator = RewardToGoBaseline(name, decay=0.5)
        assert [estimator.compute_baseline(b) for b in batches] == values
    estimator = RewardToGoBaseline("moving_average", decay=0.5)
    [estimator.compute_baseline(b) for b in batches]
    assert estimator.baseline_value == pytest.approx(0.5 * 6 + 0.5 * 5)  # the value the next batch will use
    model = REINFORCE("MlpPolicy", make_vec_env(CountingEnv, n_envs=1), baseline_decay=0.5)
    assert isinstance(model._estimator, RewardToGoBaseline) and model._estimator.decay == 0.5


def test_batches_hold_whole_episodes_carried_across_rollouts():
    """Episodes of 3 steps, rollouts of 4 steps in 2 slots: an episode that spans two rollouts enters the second."""
    env = DummyVecEnv([lambda: CountingEnv(3)] * 2)
    model = REINFORCE("MlpPolicy", env, n_steps=4, gamma=0.5, baseline="batch_mean", seed=0)
    batches = Batches()
    model.learn(16, callback=batches)  # two rollouts of 4 steps x 2 slots
    first, second = batches.batches
    episode_returns = [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3.0]  # rewards 1, 2, 3
    # rollout 1: steps 0-3 of each slot; the episodes of steps 0-2 end (one per slot), step 3 is carried over
    assert first["n_episodes"] == 2
    np.testing.assert_allclose(first["returns"], episode_returns * 2)
    np.testing.assert_allclose(first["obs"].ravel(), [0, 1, 2] * 2)
    np.testing.assert_allclose(first["advantages"], first["returns"] - np.mean(episode_returns))
    # rollout 2: steps 4-7; the carried episode (steps 3-5) ends, the one of steps 6-8 is still running
    assert second["n_episodes"] == 2
    np.testing.assert_allclose(second["returns"], episode_returns * 2)
    assert model.rollout_buffer.n_running_steps == 2 * 2
    assert model.num_timesteps == 16


def test_episode_buffer_keeps_slots_apart():
    buffer = EpisodeBuffer(n_envs=2, max_episode_length=10)
    buffer.add(np.array([[0.0], [10.0]]), np.array([0, 1]), np.array([1.0, 2.0]), np.array([False, True]), [{}, {}])
    buffer.add(
        np.array([[1.0], [11.0]]),
        np.array([1, 1]),
        np.array([3.0, 4.0]),
        np.array([True, False]),
        [{"TimeLimit.truncated": True}, {}],
    )
    first, second = buffer.pop_finished()
    assert second["rewards"] == [1.0, 3.0] and [o.item() for o in second["obs"]] == [0.0, 1.0] and second["truncated"]
    assert first["rewards"] == [2.0] and not first["truncated"]
    assert buffer.pop_finished() == [] and buffer.n_running_steps == 1
    with pytest.raises(RuntimeError, match="max_episode_length"):
        for _ in range(11):
            buffer.add(np.zeros((2, 1)), np.zeros(2), np.zeros(2), np.array([False, False]), [{}, {}])


@pytest.mark.parametrize("normalize_advantage", [False, True])
def test_one_gradient_step_is_the_policy_gradient(normalize_advantage):
    """With plain SGD, one update moves the parameters by lr * mean_t(grad log pi(a_t|s_t) * A_t)."""
    env = DummyVecEnv([lambda: CountingEnv(3)] * 2)
    lr = 0.1
    model = REINFORCE(
        "MlpPolicy",
        env,
        n_steps=3,
        gamma=0.9,
        baseline="batch_mean",
        normalize_advantage=normalize_advantage,
        learning_rate=lr,
        policy_kwargs=dict(net_arch=[4], optimizer_class=th.optim.SGD, optimizer_kwargs={}),
        seed=1,
        device="cpu",  # the reference gradient is taken on the host
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    batches = Batches()
    model.learn(6, callback=batches)
    batch = batches.batches[0]
    returns = np.concatenate([reward_to_go(np.array([1.0, 2.0, 3.0]), 0.9)] * 2)
    advantages = returns - returns.mean()
    if normalize_advantage:
        advantages = advantages / advantages.std()
    np.testing.assert_allclose(batch["advantages"], advantages, rtol=1e-6)

    reference = REINFORCE("MlpPolicy", env, policy_kwargs=dict(net_arch=[4]), seed=1, device="cpu")
    with th.no_grad():
        for p, b in zip(reference.policy.parameters(), before, strict=True):
            p.copy_(b)
    obs = th.as_tensor(batch["obs"])
    actions = th.as_tensor(batch["actions"]).long().flatten()
    log_prob = reference.policy.get_distribution(obs).log_prob(actions)
    objective = (log_prob * th.as_tensor(advantages, dtype=th.float32)).mean()
    grads = th.autograd.grad(objective, list(reference.policy.parameters()))
    for p, b, g in zip(model.policy.parameters(), before, grads, strict=True):
        th.testing.assert_close(p.detach(), b + lr * g, rtol=1e-5, atol=1e-6)


def test_epochs_and_minibatches():
    env = DummyVecEnv([lambda: CountingEnv(3)] * 2)
    model = REINFORCE("MlpPolicy", env, n_steps=6, n_epochs=3, batch_size=4, seed=0)
    model.learn(24)  # two rollouts of 6 steps x 2 slots, each 4 whole episodes
    assert model._n_updates == 2 * 3
    assert model.logger.name_to_value["train/n_samples"] == 12


def test_a_rollout_runs_on_until_an_episode_ends():
    """Episodes of 10 steps, rollouts of 4: the rollout runs on to step 10, so every update has a whole episode."""
    env = DummyVecEnv([lambda: CountingEnv(10), lambda: CountingEnv(5)])
    model = REINFORCE("MlpPolicy", DummyVecEnv([lambda: CountingEnv(10)]), n_steps=4, seed=0)
    before = [p.detach().clone() for p in model.policy.parameters()]
    batches = Batches()
    model.learn(4, callback=batches)
    assert model.num_timesteps == 10 and [b["n_episodes"] for b in batches.batches] == [1]
    assert len(batches.batches[0]["returns"]) == 10
    assert not all(th.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    # slot 1 ends an episode every 5 steps: steps 1-5 (slot 1 ends one), then 6-10 (both slots end one)
    model = REINFORCE("MlpPolicy", env, n_steps=4, seed=0)
    batches = Batches()
    model.learn(18, callback=batches)
    assert model.num_timesteps == 2 * (5 + 5) and [b["n_episodes"] for b in batches.batches] == [1, 2]


def test_bad_arguments():
    env = make_vec_env(CountingEnv, n_envs=1)
    for kwargs, match in [
        (dict(baseline_decay=1.0), r"REINFORCE: baseline_decay must be in \[0, 1\)"),
        (dict(n_steps=0), "REINFORCE: n_steps must be >= 1"),
        (dict(n_epochs=0), "REINFORCE: n_epochs must be an integer >= 1"),
        (dict(batch_size=0), "REINFORCE: batch_size must be None"),
        (dict(max_grad_norm=0.0), r"REINFORCE: max_grad_norm must be None \(no clipping\) or a finite number > 0"),
        (dict(gamma=1.5), r"REINFORCE: gamma \(the discount factor\) must be in \[0, 1\]"),
        (dict(max_episode_length=0), "REINFORCE: max_episode_length must be >= 1"),
        (dict(baseline_kwargs=dict(decay=0.5)), "baseline_kwargs=.* are options of a registered estimator"),
        (dict(n_steps="64"), r"REINFORCE: n_steps must be an integer, got '64'"),
    ]:
        with pytest.raises(ValueError, match=match):
            REINFORCE("MlpPolicy", env, **kwargs)


@pytest.mark.parametrize("name", ["gae", "group_zscore", "group_auto"])
def test_an_estimator_that_needs_a_critic_or_groups_is_refused_naming_those_that_fit(name):
    with pytest.raises(
        EstimatorError, match=rf"{name}.*which REINFORCE does not provide.*fit REINFORCE: .*reinforce_baseline"
    ):
        REINFORCE("MlpPolicy", make_vec_env(CountingEnv, n_envs=1), baseline=name)


def test_an_unknown_baseline_is_refused_before_any_step():
    with pytest.raises(
        ValueError,
        match=r"REINFORCE: unknown baseline 'critic': use one of moving_average, batch_mean, none or a registered "
        r"advantage estimator that fits REINFORCE \(.*reinforce_baseline",
    ):
        REINFORCE("MlpPolicy", make_vec_env(CountingEnv, n_envs=1), baseline="critic")


def test_a_registered_estimator_as_baseline():
    """``reinforce_baseline``: the episode's whole return minus a moving average of past batches' mean return, on
    every step of the episode (by hand: episodes of rewards 1, 2, 3 return 6 each; first batch b = 6)."""
    env = DummyVecEnv([lambda: CountingEnv(3)] * 2)
    model = REINFORCE("MlpPolicy", env, n_steps=3, baseline="reinforce_baseline", baseline_kwargs=dict(decay=0.5))
    batches = Batches()
    model.learn(6, callback=batches)
    np.testing.assert_allclose(batches.batches[0]["advantages"], np.zeros(6))
    assert model._estimator.baseline == 6.0
    # a batch that returns more than the baseline gets positive advantages
    episode = {"obs": [np.zeros(1)] * 2, "actions": [0, 1], "rewards": [5.0, 5.0], "truncated": False}
    batch = episode_batch([episode], model.gamma, model._estimator, False, model.observation_space)
    np.testing.assert_allclose(batch["advantages"], [4.0, 4.0])


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("CartPole-v1", {}),
        ("Pendulum-v1", {"use_sde": True, "sde_sample_freq": 4, "n_steps": 200}),
        ("sb3_grpo/Arithmetic-v0", {"env_kwargs": {"reward_mode": "shaped"}}),
    ],
)
def test_runs_on_spaces(env_id, kwargs):
    import sb3_grpo.envs  # noqa: F401

    env_kwargs = kwargs.pop("env_kwargs", None)
    env = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs=env_kwargs)
    kwargs.setdefault("n_steps", 128)
    model = REINFORCE("MlpPolicy", env, max_grad_norm=0.5, seed=0, **kwargs)
    model.learn(4 * kwargs["n_steps"])
    assert model.num_timesteps == 4 * kwargs["n_steps"]
    assert model.logger.name_to_value["train/n_episodes"] >= 1


def test_vec_normalize_and_multibinary():
    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0))
    REINFORCE("MlpPolicy", env, n_steps=64, seed=0).learn(256)

    class Bits(CountingEnv):
        def __init__(self):
            super().__init__(4)
            self.action_space = spaces.MultiBinary(3)

    REINFORCE("MlpPolicy", DummyVecEnv([Bits]), n_steps=8, seed=0).learn(16)


def test_deterministic_given_seed():
    def train():
        model = REINFORCE("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), n_steps=64, seed=3)
        model.learn(384)
        return [p.detach().clone() for p in model.policy.parameters()]

    for a, b in zip(train(), train(), strict=True):
        assert th.equal(a, b)


def test_save_load(tmp_path):
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = REINFORCE("MlpPolicy", env, n_steps=64, baseline="moving_average", seed=0, device="cpu")  # loaded on the cpu
    model.learn(384)
    assert model.baseline_value is not None
    model.save(tmp_path / "reinforce.zip")
    loaded = REINFORCE.load(tmp_path / "reinforce.zip", env=env, device="cpu")
    assert loaded.baseline_value == model.baseline_value and loaded.baseline == "moving_average"
    for a, b in zip(model.policy.parameters(), loaded.policy.parameters(), strict=True):
        assert th.equal(a, b)
    obs = env.reset()
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    loaded.learn(128, reset_num_timesteps=False)
    assert loaded.num_timesteps == 384 + 128
    # arguments given to load reach the estimator: a new decay goes on from the saved average, another baseline
    # replaces it
    slower = REINFORCE.load(tmp_path / "reinforce.zip", env=env, device="cpu", baseline_decay=0.5)
    assert (slower._estimator.decay, slower.baseline_value) == (0.5, model.baseline_value)
    plain = REINFORCE.load(tmp_path / "reinforce.zip", env=env, device="cpu", baseline="none")
    assert plain._estimator.baseline == "none" and plain.baseline_value is None
