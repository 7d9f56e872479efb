"""The fast paths give bitwise SB3's results: the policies' per-step path (sampling without distribution objects, no
torch argument validation) the same actions, log-probabilities, values and entropies on the same random stream, the
multi-tensor Adam the same updates, the rollout buffer's minibatches the same tensors."""

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common import policies as sb3_policies
from stable_baselines3.common.distributions import make_proba_distribution

from sb3_grpo.adaptive_kl_ppo import policies as akl_policies
from sb3_grpo.common.policies import ActorPolicy, log_prob_and_entropy, sample_with_log_prob, set_distribution
from sb3_grpo.exact_trpo import policies as trpo_policies

OBS = spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)
ACTION_SPACES = {
    "discrete": spaces.Discrete(4),
    "box": spaces.Box(-2.0, 2.0, (2,), dtype=np.float32),
    "multidiscrete": spaces.MultiDiscrete([2, 3]),  # no fast path: SB3's, unchanged
    "box_sde": spaces.Box(-2.0, 2.0, (2,), dtype=np.float32),  # gSDE
    "box_sde_squashed": spaces.Box(-2.0, 2.0, (2,), dtype=np.float32),  # no fast path
}


def _kwargs(kind: str) -> dict:
    if kind.startswith("box_sde"):
        return dict(use_sde=True, squash_output=kind.endswith("squashed"), log_std_init=-0.5)
    return {}


def _equal(a: th.Tensor | None, b: th.Tensor | None) -> None:
    if a is None or b is None:  # a squashed Gaussian has no closed-form entropy
        assert a is None and b is None
        return
    assert a.dtype == b.dtype and a.shape == b.shape
    assert th.equal(a, b), (a, b)


@pytest.mark.parametrize("kind", ["discrete", "box"])
def test_sample_with_log_prob_is_sb3s_sample_and_log_prob(kind):
    action_space = ACTION_SPACES[kind]
    dist = make_proba_distribution(action_space)
    mean_actions = th.randn(16, 4 if kind == "discrete" else 2)
    log_std = th.tensor([-0.3, 0.4])
    th.manual_seed(7)
    actions, log_prob = sample_with_log_prob(dist, mean_actions, log_std)
    th.manual_seed(7)
    sb3 = dist.proba_distribution(mean_actions, log_std) if kind == "box" else dist.proba_distribution(mean_actions)
    expected_actions = sb3.sample()
    _equal(actions, expected_actions)
    _equal(log_prob, sb3.log_prob(expected_actions))
    # and the unvalidated distribution gives the same log-probabilities and entropies
    assert set_distribution(dist, mean_actions, log_std)
    assert dist.distribution._validate_args is False
    _equal(dist.log_prob(expected_actions), sb3.log_prob(expected_actions))
    _equal(dist.entropy(), sb3.entropy())


def test_other_distributions_have_no_fast_path():
    dist = make_proba_distribution(ACTION_SPACES["multidiscrete"])
    assert sample_with_log_prob(dist, th.zeros(2, 5), None) is None
    assert not set_distribution(dist, th.zeros(2, 5), None)
    squashed = make_proba_distribution(ACTION_SPACES["box"], use_sde=True, dist_kwargs=dict(squash_output=True))
    assert sample_with_log_prob(squashed, th.zeros(2, 2), th.zeros(3, 2), th.zeros(2, 3)) is None
    sde = make_proba_distribution(ACTION_SPACES["box"], use_sde=True)
    assert sample_with_log_prob(sde, th.zeros(2, 2), th.zeros(3, 2)) is None  # gSDE needs the latent features


@pytest.mark.parametrize("kind", sorted(ACTION_SPACES))
@pytest.mark.parametrize("ours", [akl_policies.MlpPolicy, trpo_policies.MlpPolicy])
def test_actor_critic_forward_matches_sb3(ours, kind):
    action_space = ACTION_SPACES[kind]
    kwargs = dict(net_arch=[8], share_features_extractor=ours is akl_policies.MlpPolicy, **_kwargs(kind))
    th.manual_seed(0)
    policy = ours(OBS, action_space, lambda _: 1e-3, **kwargs)
    reference = sb3_policies.ActorCriticPolicy(OBS, action_space, lambda _: 1e-3, **kwargs)
    reference.load_state_dict(policy.state_dict())
    obs = th.rand(8, 3) * 2 - 1
    with th.no_grad():
        th.manual_seed(3)
        if kwargs.get("use_sde"):
            policy.reset_noise(8)
        got = policy(obs)
        th.manual_seed(3)
        if kwargs.get("use_sde"):
            reference.reset_noise(8)
        expected = reference(obs)
        for a, b in zip(got, expected, strict=True):
            _equal(a, b)
        for deterministic in (True, False):
            th.manual_seed(4)
            a = policy.predict(obs.numpy(), deterministic=deterministic)[0]
            th.manual_seed(4)
            np.testing.assert_array_equal(a, reference.predict(obs.numpy(), deterministic=deterministic)[0])
    actions = expected[0]
    for a, b in zip(policy.evaluate_actions(obs, actions), reference.evaluate_actions(obs, actions), strict=True):
        _equal(a, b)


@pytest.mark.parametrize("kind", sorted(ACTION_SPACES))
def test_actor_policy_forward_matches_its_distribution(kind):
    th.manual_seed(0)
    policy = ActorPolicy(OBS, ACTION_SPACES[kind], lambda _: 1e-3, net_arch=[8], **_kwargs(kind))
    if kind.startswith("box_sde"):
        policy.reset_noise(8)
    obs = th.rand(8, 3)
    with th.no_grad():
        th.manual_seed(5)
        actions, log_prob = policy(obs)
        th.manual_seed(5)
        distribution = policy.get_distribution(obs)
        expected = distribution.get_actions()
        _equal(actions, expected.reshape(actions.shape))
        _equal(log_prob, distribution.log_prob(expected))


@pytest.mark.parametrize("kind", sorted(ACTION_SPACES))
def test_actor_policy_evaluate_actions_matches_its_distribution(kind):
    """evaluate_actions' direct path gives the values and the gradients of distribution.log_prob / entropy."""
    th.manual_seed(0)
    policy = ActorPolicy(OBS, ACTION_SPACES[kind], lambda _: 1e-3, net_arch=[8], **_kwargs(kind))
    if kind.startswith("box_sde"):
        policy.reset_noise(8)
    obs = th.rand(8, 3)
    with th.no_grad():
        actions = policy.get_distribution(obs).get_actions()

    def grads(log_prob: th.Tensor, entropy: th.Tensor | None) -> list[th.Tensor]:
        policy.zero_grad()
        loss = (log_prob * th.linspace(-1.0, 1.0, len(log_prob))).sum()
        if entropy is not None:
            loss = loss - 0.3 * entropy.sum()
        loss.backward()
        return [p.grad.clone() for p in policy.parameters() if p.grad is not None]

    log_prob, entropy = policy.evaluate_actions(obs, actions)
    got = grads(log_prob, entropy)
    distribution = policy.get_distribution(obs)
    expected_log_prob, expected_entropy = distribution.log_prob(actions), distribution.entropy()
    _equal(log_prob, expected_log_prob)
    _equal(entropy, expected_entropy)
    expected = grads(expected_log_prob, expected_entropy)
    assert len(got) == len(expected) > 0
    for a, b in zip(got, expected, strict=True):
        _equal(a, b)
    mean_actions = policy.action_net(policy._latent(obs))
    direct = log_prob_and_entropy(policy.action_dist, mean_actions, getattr(policy, "log_std", None), actions)
    assert (direct is not None) == (kind in ("discrete", "box"))  # the others take the distribution's path


def test_multi_tensor_adam_updates_bitwise_as_the_per_tensor_loop():
    from sb3_grpo.common.policies import multi_tensor_adam

    th.manual_seed(0)
    start = [th.randn(5, 3), th.randn(3), th.randn(1, 5)]
    results = []
    for fast in (False, True):
        params = [p.clone().requires_grad_() for p in start]
        optimizer = th.optim.Adam(params, lr=1e-2, eps=1e-5)
        if fast:
            assert multi_tensor_adam(optimizer).param_groups[0]["foreach"] is True
        generator = th.Generator().manual_seed(1)
        for _ in range(5):
            for p in params:
                p.grad = th.randn(p.shape, generator=generator)
            optimizer.step()
        results.append(params)
    for slow, fast in zip(*results, strict=True):
        _equal(slow.detach(), fast.detach())
    # explicit choices and other optimizers are left alone
    assert multi_tensor_adam(th.optim.Adam(start, foreach=False)).param_groups[0]["foreach"] is False
    assert multi_tensor_adam(th.optim.SGD(start, lr=0.1)).param_groups[0]["foreach"] is None


def test_policies_use_the_multi_tensor_adam():
    for cls in (akl_policies.MlpPolicy, trpo_policies.MlpPolicy, ActorPolicy):
        policy = cls(OBS, ACTION_SPACES["discrete"], lambda _: 1e-3, net_arch=[4])
        assert policy.optimizer.param_groups[0]["foreach"] is True, cls


@pytest.mark.parametrize("kind", ["discrete", "box"])
def test_estimator_buffer_minibatches_are_sb3s(kind):
    from stable_baselines3.common.buffers import RolloutBuffer

    from sb3_grpo.common.buffers import EstimatorRolloutBuffer

    action_space = ACTION_SPACES[kind]
    buffers = [cls(8, OBS, action_space, n_envs=2) for cls in (RolloutBuffer, EstimatorRolloutBuffer)]
    rng = np.random.default_rng(0)
    for _ in range(8):
        step = (
            rng.normal(size=(2, 3)).astype(np.float32),
            np.stack([action_space.sample() for _ in range(2)]),
            rng.normal(size=2),
            rng.random(2) < 0.2,
            th.as_tensor(rng.normal(size=(2, 1)), dtype=th.float32),
            th.as_tensor(rng.normal(size=2), dtype=th.float32),
        )
        for buffer in buffers:
            buffer.add(*step)
    advantages, returns = rng.normal(size=(2, 8, 2)).astype(np.float32)
    for buffer in buffers:
        buffer.advantages, buffer.returns = advantages.copy(), returns.copy()

    def batches(buffer):
        np.random.seed(1)
        return [b for _ in range(2) for b in buffer.get(5)]

    for ours, sb3 in zip(batches(buffers[1]), batches(buffers[0]), strict=True):
        for a, b in zip(ours, sb3, strict=True):
            _equal(a, b)
    # a replaced array is read anew, writes into the current one show through
    buffers[1].returns = buffers[1].returns + 1.0
    buffers[1].advantages[3] = 42.0
    sample = buffers[1]._get_samples(np.array([3]))
    assert sample.returns.item() == buffers[1].returns[3].item() and sample.advantages.item() == 42.0
