"""TokenSequenceExtractor: spaces it reads, shapes, the one-hot round trip, causality, every algorithm, save/load."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.preprocessing import preprocess_obs

import sb3_grpo.envs  # noqa: F401  (registers the ids)
from sb3_grpo.common.torch_layers import TokenSequenceExtractor, token_space_info

MODELS = ["gru", "transformer"]
SPACE = spaces.MultiDiscrete([15] * 5)
REWARDS = ["arithmetic_exact_match", "arithmetic_format"]


def extractor(space=SPACE, **kwargs):
    th.manual_seed(0)
    return TokenSequenceExtractor(space, **kwargs)


def batch(space, n=6, seed=0):
    space.seed(seed)
    return th.as_tensor(np.stack([space.sample() for _ in range(n)]))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(("pooling", "factor"), [("last", 1), ("mean", 1), ("flatten", 5)])
def test_features_shape(model, pooling, factor):
    net = extractor(sequence_model=model, embed_dim=8, hidden_dim=12, pooling=pooling)
    width = 12 if model == "gru" else 8
    assert net.features_dim == width * factor
    obs = batch(SPACE)
    features = net(preprocess_obs(obs, SPACE))
    assert features.shape == (6, width * factor) and th.isfinite(features).all()


@pytest.mark.parametrize("model", MODELS)
def test_one_hot_ids_and_float_ids_give_the_same_features(model):
    net = extractor(sequence_model=model)
    obs = batch(SPACE)
    one_hot = preprocess_obs(obs, SPACE)  # what SB3 hands a features extractor
    assert one_hot.shape == (6, 75)
    th.testing.assert_close(net.token_ids(one_hot), obs.long())
    th.testing.assert_close(net(one_hot), net(obs))
    th.testing.assert_close(net(one_hot), net(obs.float()))


def test_unequal_multidiscrete_blocks():
    space = spaces.MultiDiscrete([3, 7, 2, 7])
    net = extractor(space)
    assert token_space_info(space) == (4, 7) and net.vocab_size == 7
    obs = batch(space, n=20)
    th.testing.assert_close(net.token_ids(preprocess_obs(obs, space)), obs.long())


def test_box_of_ids():
    space = spaces.Box(0, 9, shape=(4,), dtype=np.int64)
    net = extractor(space, sequence_model="transformer")
    assert token_space_info(space) == (4, 10)
    obs = batch(space)
    th.testing.assert_close(net(preprocess_obs(obs, space)), net(obs))


def test_embedding_is_a_lookup():
    """Ids go through the embedding table: the GRU's input at each position is the id's row."""
    net = extractor(embed_dim=4, hidden_dim=3)
    ids = th.tensor([[1, 2, 3, 4, 14]])
    expected, _ = net.gru(net.embedding.weight[ids[0]].unsqueeze(0))
    th.testing.assert_close(net(ids), expected[:, -1])


def test_transformer_is_causal():
    """With per-position outputs, changing the token at position t changes no output before t."""
    net = extractor(sequence_model="transformer", n_layers=2, pooling="flatten", embed_dim=8)
    ids = batch(SPACE, n=1)
    for t in range(5):
        changed = ids.clone()
        changed[0, t] = (changed[0, t] + 1) % 15
        before = net(ids).view(5, 8)
        after = net(changed).view(5, 8)
        th.testing.assert_close(before[:t], after[:t])
        assert not th.allclose(before[t], after[t])


def test_bad_inputs():
    with pytest.raises(ValueError, match="sequence_model"):
        TokenSequenceExtractor(SPACE, sequence_model="lstm")
    with pytest.raises(ValueError, match="pooling"):
        TokenSequenceExtractor(SPACE, pooling="max")
    with pytest.raises(ValueError, match="embed_dim"):
        TokenSequenceExtractor(SPACE, embed_dim=0)
    with pytest.raises(ValueError, match="n_heads"):
        TokenSequenceExtractor(SPACE, sequence_model="transformer", embed_dim=10, n_heads=3)
    with pytest.raises(TypeError, match="MultiDiscrete"):
        TokenSequenceExtractor(spaces.Discrete(5))
    with pytest.raises(ValueError, match="low >= 0"):
        TokenSequenceExtractor(spaces.Box(-1, 5, shape=(3,)))
    with pytest.raises(ValueError, match="one-dimensional"):
        TokenSequenceExtractor(spaces.Box(0, 5, shape=(3, 2)))
    with pytest.raises(ValueError, match="vocab_size"):
        TokenSequenceExtractor(SPACE, vocab_size=10)
    net = TokenSequenceExtractor(spaces.Box(0, 9, shape=(4,)))
    with pytest.raises(ValueError, match=r"0\.\.9"):
        net(th.tensor([[1.0, 2.0, 3.0, 12.0]]))
    with pytest.raises(ValueError, match="4 token ids"):
        net(th.zeros(2, 7))


def _algorithms():
    from stable_baselines3 import PPO

    from sb3_grpo import GRPO, REINFORCE, AdaptiveKLPPO, ExactTRPO, OnlineDPO

    common = dict(n_steps=32, seed=0, device="cpu")
    return {
        "grpo": lambda env, pk: GRPO(
            "MlpPolicy", env, group_size=4, batch_size=64, n_epochs=2, policy_kwargs=pk, reward_functions=REWARDS, **common
        ),
        "ppo": lambda env, pk: PPO("MlpPolicy", env, batch_size=64, n_epochs=2, policy_kwargs=pk, **common),
        # conjugate gradients: see test_exact_trpo_exact_fisher_* for the exact solve
        "exact_trpo": lambda env, pk: ExactTRPO(
            "MlpPolicy", env, batch_size=64, fisher_solver="cg", policy_kwargs=pk, **common
        ),
        "adaptive_kl_ppo": lambda env, pk: AdaptiveKLPPO(
            "MlpPolicy", env, batch_size=64, n_epochs=2, policy_kwargs=pk, **common
        ),
        "reinforce": lambda env, pk: REINFORCE("MlpPolicy", env, policy_kwargs=pk, **common),
        "online_dpo": lambda env, pk: OnlineDPO(
            "MlpPolicy", env, group_size=4, batch_size=8, n_epochs=2, policy_kwargs=pk, reward_functions=REWARDS, **common
        ),
    }


@pytest.mark.parametrize("algo", ["grpo", "ppo", "exact_trpo", "adaptive_kl_ppo", "reinforce", "online_dpo"])
@pytest.mark.parametrize("model", MODELS)
def test_every_algorithm_trains_with_it(algo, model):
    env_kwargs = {} if algo in ("grpo", "online_dpo") else {"reward_mode": "shaped"}
    env = make_vec_env("sb3_grpo/Arithmetic-v0", n_envs=4, seed=0, env_kwargs=env_kwargs)
    policy_kwargs = dict(
        features_extractor_class=TokenSequenceExtractor,
        features_extractor_kwargs=dict(sequence_model=model, embed_dim=8, hidden_dim=16),
        net_arch=[16],
    )
    agent = _algorithms()[algo](env, policy_kwargs)
    extractor_params = [p.clone() for p in agent.policy.features_extractor.parameters()]
    agent.learn(300)
    assert agent.num_timesteps >= 300
    assert isinstance(agent.policy.features_extractor, TokenSequenceExtractor)
    moved = [not th.equal(a, b) for a, b in zip(extractor_params, agent.policy.features_extractor.parameters(), strict=True)]
    assert any(moved)  # the extractor is trained with the policy


class IdsAsBox(gym.ObservationWrapper):
    """The arithmetic env's token ids as a float Box (what a text env without MultiDiscrete would emit)."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = spaces.Box(0, 14, env.observation_space.shape, dtype=np.float32)

    def observation(self, observation):
        return observation.astype(np.float32)


def _exact_trpo_with_extractor(model, wrapper_class=None):
    from sb3_grpo import ExactTRPO

    env = make_vec_env(
        "sb3_grpo/Arithmetic-v0", n_envs=4, seed=0, env_kwargs={"reward_mode": "shaped"}, wrapper_class=wrapper_class
    )
    policy_kwargs = dict(
        features_extractor_class=TokenSequenceExtractor,
        features_extractor_kwargs=dict(sequence_model=model, embed_dim=8, hidden_dim=16),
        net_arch=[16],
    )
    return ExactTRPO("MlpPolicy", env, n_steps=32, batch_size=64, fisher_solver="exact", policy_kwargs=policy_kwargs, seed=0)


@pytest.mark.parametrize("model", MODELS)
def test_exact_trpo_exact_fisher_with_token_ids(model):
    """The exact Fisher forms per-sample Jacobians with torch.func (vmap): the extractor runs under it."""
    agent = _exact_trpo_with_extractor(model, wrapper_class=IdsAsBox)
    agent.learn(300)
    assert agent.num_timesteps >= 300


def test_exact_trpo_exact_fisher_with_multidiscrete():
    """SB3 one-hot encodes the MultiDiscrete ids before the extractor; the exact Fisher preprocesses outside vmap."""
    _exact_trpo_with_extractor("gru").learn(300)


@pytest.mark.parametrize("model", MODELS)
def test_save_load_round_trip(model, tmp_path):
    from sb3_grpo import GRPO

    env = make_vec_env("sb3_grpo/Arithmetic-v0", n_envs=4, seed=0)
    policy_kwargs = dict(
        features_extractor_class=TokenSequenceExtractor,
        features_extractor_kwargs=dict(sequence_model=model, embed_dim=8, hidden_dim=16, pooling="mean"),
    )
    agent = GRPO(
        "MlpPolicy", env, group_size=4, n_steps=16, batch_size=32, n_epochs=1, policy_kwargs=policy_kwargs, seed=0,
        device="cpu",  # compared with the copy loaded on the cpu
    )  # fmt: skip
    agent.learn(100)
    agent.save(tmp_path / "model.zip")
    loaded = GRPO.load(tmp_path / "model.zip", device="cpu")
    extractor_loaded = loaded.policy.features_extractor
    assert isinstance(extractor_loaded, TokenSequenceExtractor)
    assert (extractor_loaded.sequence_model, extractor_loaded.pooling) == (model, "mean")
    for (name, a), (_, b) in zip(agent.policy.state_dict().items(), loaded.policy.state_dict().items(), strict=True):
        assert th.equal(a, b), name
    obs = env.reset()
    np.testing.assert_array_equal(agent.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    with th.no_grad():
        obs_t = th.as_tensor(obs)
        th.testing.assert_close(
            agent.policy.get_distribution(obs_t).distribution.logits,
            loaded.policy.get_distribution(obs_t).distribution.logits,
        )


def test_training_and_evaluation_modes_agree():
    """No dropout or mode-dependent kernels: rollouts (eval mode, no grad) and updates see the same log-probs."""
    from sb3_grpo import GRPO

    env = make_vec_env("sb3_grpo/Arithmetic-v0", n_envs=2, seed=0)
    policy_kwargs = dict(
        features_extractor_class=TokenSequenceExtractor, features_extractor_kwargs=dict(sequence_model="transformer")
    )
    agent = GRPO("MlpPolicy", env, group_size=2, policy_kwargs=policy_kwargs, seed=0, device="cpu")  # host tensors below
    obs = th.as_tensor(np.stack([env.reset() for _ in range(4)]).reshape(-1, 5))
    actions = th.arange(len(obs)) % 11
    agent.policy.set_training_mode(False)
    with th.no_grad():
        eval_log_prob, _ = agent.policy.evaluate_actions(obs, actions)
    agent.policy.set_training_mode(True)
    train_log_prob, _ = agent.policy.evaluate_actions(obs, actions)
    th.testing.assert_close(eval_log_prob, train_log_prob.detach(), rtol=0, atol=1e-6)
