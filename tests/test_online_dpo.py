"""OnlineDPO: preference pairs, the loss and its gradient against a hand computation, dynamics cancel, the
reference policy, save/load, errors."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from envs import TargetEnv
from gymnasium import spaces
from op_trace import ATOMIC_ON_CUDA, RecordOps
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

from sb3_grpo import GRPO, OnlineDPO
from sb3_grpo.online_dpo.loss import trajectory_log_probs
from sb3_grpo.online_dpo.pairs import preference_pairs

needs_cuda = pytest.mark.skipif(not th.cuda.is_available(), reason="no CUDA device")


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    return np.exp(log_softmax(x, axis))


def expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def params(policy):
    return th.cat([p.detach().cpu().flatten().clone() for p in policy.parameters()])


# ---------------------------------------------------------------- pairs


def test_best_against_worst_skips_ties():
    group_ids = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    scores = np.array([1.0, 3.0, 2.0, 5.0, 5.0, 0.0, 1.0, 1.0])
    # group 0: 3 beats 1; group 1: all equal, no pair; group 2: the first of the two best (index 6) beats index 5
    np.testing.assert_array_equal(preference_pairs(group_ids, scores), [[1, 0], [6, 5]])


def test_all_strictly_ordered_pairs():
    group_ids = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    scores = np.array([1.0, 3.0, 2.0, 5.0, 5.0, 0.0, 1.0, 1.0])
    expected = [[1, 0], [1, 2], [2, 0], [6, 5], [7, 5]]  # (6, 7) is a tie: no pair either way
    np.testing.assert_array_equal(preference_pairs(group_ids, scores, "all"), expected)


def test_pairs_stay_within_groups_in_any_order():
    group_ids = np.array([3, 1, 3, 1])
    scores = np.array([0.0, 9.0, 1.0, -9.0])
    np.testing.assert_array_equal(preference_pairs(group_ids, scores), [[2, 0], [1, 3]])
    assert preference_pairs(np.zeros(0, int), np.zeros(0)).shape == (0, 2)
    with pytest.raises(ValueError, match="pairs must be one of"):
        preference_pairs(group_ids, scores, "best")


# ---------------------------------------------------------------- loss and gradient oracle


class TinyEnv(gym.Env):
    """Two-dimensional observations, three actions (only its spaces matter here)."""

    observation_space = spaces.Box(-5.0, 5.0, (2,), np.float32)
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, True, False, {}


def _linear(policy, weight, bias):
    with th.no_grad():
        policy.action_net.weight.copy_(th.as_tensor(weight))
        policy.action_net.bias.copy_(th.as_tensor(bias))


@pytest.mark.parametrize("loss_type", ["sigmoid", "ipo"])
def test_loss_and_gradient_by_hand(loss_type):
    """A linear softmax policy, three trajectories (lengths 2, 1, 3) and two pairs: one SGD step of train() moves
    the parameters by -lr times the hand-computed gradient of the mean pair loss, and logs the hand-computed loss."""
    beta, lr = 0.7, 0.05
    model = OnlineDPO(
        "MlpPolicy",
        make_vec_env(TinyEnv, n_envs=1),
        beta=beta,
        loss_type=loss_type,
        learning_rate=lr,
        n_epochs=1,
        batch_size=None,
        max_grad_norm=1e9,
        policy_kwargs=dict(net_arch=[], optimizer_class=th.optim.SGD, optimizer_kwargs={}),
        seed=0,
        device="cpu",  # the oracle is NumPy on the host
    )
    model.set_logger(configure(None, []))
    rng = np.random.default_rng(0)
    weight, bias = rng.normal(size=(3, 2)), rng.normal(size=3)
    ref_weight, ref_bias = rng.normal(size=(3, 2)), rng.normal(size=3)
    _linear(model.policy, weight, bias)
    _linear(model.ref_policy, ref_weight, ref_bias)

    obs = rng.normal(size=(6, 2)).astype(np.float32)
    actions = np.array([0, 2, 1, 1, 0, 2])
    trajectory = np.array([0, 0, 1, 2, 2, 2])
    buffer = model.rollout_buffer
    buffer.fill(obs, actions.reshape(-1, 1), np.zeros(6), np.zeros(6), np.full(6, 1 / 6), trajectory)
    buffer.pairs = np.array([[0, 1], [2, 1]])  # trajectories 0 and 2 each preferred to 1

    def log_pi(w, b):  # (6,) log-probability of each step's action
        return log_softmax(obs.astype(np.float64) @ w.T + b, axis=1)[np.arange(6), actions]

    ratio = np.bincount(trajectory, weights=log_pi(weight, bias) - log_pi(ref_weight, ref_bias))
    h = np.array([ratio[0] - ratio[1], ratio[2] - ratio[1]])
    if loss_type == "sigmoid":
        loss = np.mean(np.log1p(np.exp(-beta * h)))
        dloss_dh = -beta * expit(-beta * h) / 2
    else:
        loss = np.mean((h - 1 / (2 * beta)) ** 2)
        dloss_dh = 2 * (h - 1 / (2 * beta)) / 2
    # d log pi(a|x) / d logits = onehot(a) - p; sum over a trajectory's steps; h = ratio_w - ratio_l
    dlogit = np.eye(3)[actions] - softmax(obs.astype(np.float64) @ weight.T + bias, axis=1)
    per_trajectory_w = np.stack([sum(np.outer(dlogit[t], obs[t]) for t in np.flatnonzero(trajectory == i)) for i in range(3)])
    per_trajectory_b = np.stack([dlogit[trajectory == i].sum(0) for i in range(3)])
    grad_w = dloss_dh[0] * (per_trajectory_w[0] - per_trajectory_w[1]) + dloss_dh[1] * (
        per_trajectory_w[2] - per_trajectory_w[1]
    )
    grad_b = dloss_dh[0] * (per_trajectory_b[0] - per_trajectory_b[1]) + dloss_dh[1] * (
        per_trajectory_b[2] - per_trajectory_b[1]
    )

    model.train()
    assert model.logger.name_to_value["train/loss"] == pytest.approx(loss, rel=1e-5)
    assert model.logger.name_to_value["train/margin"] == pytest.approx(beta * h.mean(), rel=1e-5)
    assert model.logger.name_to_value["train/preference_accuracy"] == pytest.approx(np.mean(h > 0))
    np.testing.assert_allclose(model.policy.action_net.weight.detach().numpy(), weight - lr * grad_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.policy.action_net.bias.detach().numpy(), bias - lr * grad_b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.ref_policy.action_net.weight.detach().numpy(), ref_weight, rtol=1e-6)  # frozen


# ---------------------------------------------------------------- dynamics cancel


class HiddenDriftEnv(gym.Env):
    """The observation is the time step only; a hidden state drifts with the action plus Gaussian noise of scale
    ``noise``, and the env reward depends on it. Two values of ``noise`` are two envs whose transition
    probabilities differ while the observations the policy sees do not."""

    observation_space = spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, noise: float = 0.0):
        self.noise = noise

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.x = 0, 0.0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        self.x += float(action) + self.noise * float(self.np_random.normal())
        return np.array([self.t / 4], np.float32), -(self.x**2), False, self.t >= 4, {}


def ones_played(trajectory):
    """Scores a trajectory by its actions only: how often it played action 1."""
    return float(np.sum(np.asarray(trajectory.actions) == 1))


def test_environment_dynamics_cancel():
    """The same actions and scores give the same loss and the same update on envs whose dynamics differ."""
    runs = []
    for noise in (0.1, 3.0):
        model = OnlineDPO(
            "MlpPolicy",
            make_vec_env(HiddenDriftEnv, n_envs=2, env_kwargs=dict(noise=noise)),
            group_size=4,
            groups_per_rollout=4,
            batch_size=None,
            n_epochs=2,
            reward_functions=[ones_played],
            learning_rate=1e-2,
            seed=5,
        )
        model.learn(total_timesteps=4 * 4 * 4)
        runs.append(model)
    a, b = runs
    assert [e["r"] for e in a.ep_info_buffer] != [e["r"] for e in b.ep_info_buffer]  # the dynamics did differ
    np.testing.assert_array_equal(a.rollout_buffer.actions, b.rollout_buffer.actions)
    np.testing.assert_array_equal(a.rollout_buffer.pairs, b.rollout_buffer.pairs)
    assert len(a.rollout_buffer.pairs) > 0
    assert a.logger.name_to_value["train/loss"] == b.logger.name_to_value["train/loss"]
    assert th.equal(params(a.policy), params(b.policy))


# ---------------------------------------------------------------- reproducible on CUDA (#45)


#: Ops whose CUDA kernels add with atomics, so that a float sum depends on the order the threads ran in (the
#: "normally-nondeterministic" ops of torch.use_deterministic_algorithms): a seeded update must not use them.
def test_trajectory_log_probs_add_in_a_fixed_order():
    """``log pi(tau)`` sums steps by trajectory: ``index_add`` on the CPU (a serial loop there), a sorted
    ``index_put_(accumulate=True)`` elsewhere, since CUDA's ``index_add`` adds with atomics in a varying order."""
    g = th.Generator().manual_seed(0)
    steps = th.randn(2000, generator=g)
    trajectory = th.randint(0, 40, (2000,), generator=g)
    sums = trajectory_log_probs(steps, trajectory, 41)
    expected = np.bincount(trajectory.numpy(), weights=steps.double().numpy(), minlength=41)
    np.testing.assert_allclose(sums.numpy(), expected, rtol=1e-5, atol=1e-5)  # float32 sums of ~50 steps
    assert sums[40] == 0  # a trajectory without steps
    serial = np.zeros(41, dtype=np.float32)
    for value, t in zip(steps.numpy(), trajectory.numpy(), strict=True):
        serial[t] += value  # float32 rounding after each addition, in step order
    np.testing.assert_array_equal(sums.numpy(), serial)
    with RecordOps() as cpu:
        trajectory_log_probs(steps, trajectory, 41)
    with RecordOps() as elsewhere:  # "meta": tensors without data, which run a non-CPU device's code path
        trajectory_log_probs(steps.to("meta"), trajectory.to("meta"), 41)
    assert "index_add" in cpu.ops and "index_put" in elsewhere.ops and not elsewhere.ops & ATOMIC_ON_CUDA


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_cuda)])
def test_update_uses_no_atomic_accumulation(device):
    """One OnlineDPO update (the reference's trajectory sums, the pairs' margins and their backward pass) runs no op
    that adds with atomics on CUDA; on the CPU only ``index_add``, a serial loop there, is allowed."""
    model = make_target(
        device=device, pairs="all", batch_size=4, env=make_vec_env(TargetEnv, n_envs=4, seed=0, env_kwargs=dict(kind="box"))
    )
    model.learn(total_timesteps=4 * 4 * 5)
    assert len(model.rollout_buffer.pairs) > 0
    with RecordOps() as recorded:
        model.train()
    assert "mm" in recorded.ops or "addmm" in recorded.ops  # the recorder saw the update
    allowed = {"index_add"} if device == "cpu" else set()
    assert not recorded.ops & (ATOMIC_ON_CUDA - allowed)


@needs_cuda
def test_seeded_runs_reproduce_on_cuda(monkeypatch):
    """Two seeded runs on cuda give the same parameters bit for bit, and the same as a run under
    ``torch.use_deterministic_algorithms(True)`` up to float32 rounding (that mode may choose other cuBLAS
    kernels)."""

    def run():
        model = make_target(device="cuda", pairs="all", batch_size=4)
        model.learn(total_timesteps=4 * 4 * 5 * 3)
        return params(model.policy)

    first, second = run(), run()
    assert th.equal(first, second)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # what torch asks for deterministic cuBLAS
    th.use_deterministic_algorithms(True)
    try:
        strict = run()  # raises if an op has no deterministic CUDA implementation
    finally:
        th.use_deterministic_algorithms(False)
    th.testing.assert_close(strict, first, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- reference, learning, saving


def make_target(env=None, **kwargs):
    kwargs = dict(group_size=4, groups_per_rollout=4, batch_size=None, n_epochs=2, learning_rate=1e-2, seed=0) | kwargs
    return OnlineDPO("MlpPolicy", env or make_vec_env(TargetEnv, n_envs=4, seed=0), **kwargs)


@pytest.mark.parametrize("interval", [None, 1, 2])
def test_reference_is_the_initial_policy_or_refreshed(interval):
    model = make_target(ref_update_interval=interval)
    initial = params(model.policy)
    snapshots = []
    for _ in range(2):
        model.learn(total_timesteps=4 * 4 * 5, reset_num_timesteps=False)
        snapshots.append((params(model.policy), params(model.ref_policy)))
    (first, first_ref), (second, second_ref) = snapshots
    assert not th.equal(first, initial) and not th.equal(second, first)
    if interval is None:
        assert th.equal(first_ref, initial) and th.equal(second_ref, initial)
    elif interval == 1:
        assert th.equal(first_ref, first) and th.equal(second_ref, second)
    else:
        assert th.equal(first_ref, initial) and th.equal(second_ref, second)


def test_groups_without_a_preference_give_no_update():
    model = make_target(reward_functions=[lambda trajectory: 1.0])
    before = params(model.policy)
    model.learn(total_timesteps=4 * 4 * 5)
    assert len(model.rollout_buffer.pairs) == 0 and model.logger.name_to_value["rollout/n_pairs"] == 0
    assert th.equal(before, params(model.policy))


def test_learns_to_match_the_target():
    """TargetEnv: one point per step that matches a target drawn at reset (5 at best, 5/3 by chance)."""
    model = make_target(groups_per_rollout=8, n_epochs=4, learning_rate=3e-3, pairs="all")
    model.learn(total_timesteps=12_000)
    returns = [e["r"] for e in model.ep_info_buffer]
    assert np.mean(returns[-20:]) > 4.5


def test_save_load_keeps_the_reference_and_options(tmp_path):
    model = make_target(beta=0.3, loss_type="ipo", pairs="all", ref_update_interval=None)
    initial = params(model.policy)
    model.learn(total_timesteps=4 * 4 * 5)
    model.save(tmp_path / "dpo.zip")
    loaded = OnlineDPO.load(tmp_path / "dpo.zip", env=make_vec_env(TargetEnv, n_envs=4, seed=0))
    assert (loaded.beta, loaded.loss_type, loaded.pairs, loaded.ref_update_interval) == (0.3, "ipo", "all", None)
    assert th.equal(params(loaded.ref_policy), initial)
    assert th.equal(params(loaded.policy), params(model.policy))
    loaded.learn(total_timesteps=4 * 4 * 5, reset_num_timesteps=False)
    with pytest.raises(ValueError, match="saved by OnlineDPO"):
        GRPO.load(tmp_path / "dpo.zip")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(beta=0.0), "beta .* must be a finite number > 0"),
        (dict(beta=-1.0), "beta .* must be a finite number > 0"),
        (dict(beta="0.1"), "beta must be a number"),
        (dict(loss_type="hinge"), "loss_type must be one of"),
        (dict(pairs="best"), "pairs must be one of"),
        (dict(ref_update_interval=0), "ref_update_interval must be None"),
        (dict(group_size=1), "group_size must be an integer >= 2"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=f"OnlineDPO: {match}"):
        OnlineDPO("MlpPolicy", make_vec_env(TargetEnv, n_envs=2), **kwargs)


def test_branching_groups_give_pairs_of_segments():
    """With branch_every, the members of a group are segments from one snapshot state: pairs compare segments."""
    model = OnlineDPO(
        "MlpPolicy", make_vec_env("Pendulum-v1", n_envs=4, seed=0), group_size=4, n_steps=40, branch_every=10, seed=0
    )
    model.learn(total_timesteps=320)
    buffer = model.rollout_buffer
    assert buffer.n_trajectories > 0 and np.all(np.bincount(buffer.trajectory) <= 10)
    assert len(buffer.pairs) > 0
    assert np.all(buffer.group_ids[buffer.pairs[:, 0]] == buffer.group_ids[buffer.pairs[:, 1]])
