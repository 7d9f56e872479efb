"""SB3 conformance: custom policies through ``policy_kwargs`` (SB3 ``tests/test_custom_policy.py``): every
``net_arch`` form, activation, optimizer, shared or separate features extractor, custom extractor."""

import pytest
import torch as th
from gymnasium import spaces
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params, has_critic
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

NET_ARCHS = {
    "empty": [],
    "one": [4],
    "two": [4, 4],
    "dict_vf16_pi8": dict(vf=[16], pi=[8]),
    "dict_vf84_pi8": dict(vf=[8, 4], pi=[8]),
    "dict_vf8_pi84": dict(vf=[8], pi=[8, 4]),
    "dict_pi_only": dict(pi=[8]),
    # SB3's old format, which SB3 converts with a warning
    "old_vf_only": [dict(vf=[8])],
    "old_vf_pi": [dict(vf=[8], pi=[4])],
}


def _expected_pi(net_arch) -> list[int]:
    if isinstance(net_arch, list) and net_arch and isinstance(net_arch[0], dict):
        net_arch = net_arch[0]
    if isinstance(net_arch, dict):
        return list(net_arch.get("pi", []))
    return list(net_arch)


def _policy_hidden_sizes(model) -> list[int]:
    """Output sizes of the Linear layers from the features to the action logits."""
    policy = model.policy
    net = policy.mlp_extractor.policy_net if hasattr(policy, "mlp_extractor") else policy.policy_net  # actor only
    return [m.out_features for m in [*net.modules(), policy.action_net] if isinstance(m, nn.Linear)]


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("net_arch", list(NET_ARCHS.values()), ids=list(NET_ARCHS))
def test_flexible_mlp(model_class, net_arch):
    """Every net_arch form SB3 takes builds the policy network it describes and trains; the old list-of-dict form
    warns (SB3 converts it) and the actor-only algorithms (GRPO, REINFORCE, OnlineDPO) warn that a ``vf`` part is ignored."""
    kwargs = algo_kwargs(model_class, policy_kwargs=dict(net_arch=net_arch))
    old_format = isinstance(net_arch, list) and len(net_arch) > 0 and isinstance(net_arch[0], dict)
    ignores_vf = not has_critic(model_class) and "vf" in (
        net_arch[0] if old_format else net_arch if isinstance(net_arch, dict) else {}
    )
    if old_format or ignores_vf:
        with pytest.warns(UserWarning):
            model = model_class("MlpPolicy", "CartPole-v1", **kwargs)
    else:
        model = model_class("MlpPolicy", "CartPole-v1", **kwargs)
    model.learn(64)
    assert _policy_hidden_sizes(model) == [*_expected_pi(net_arch), model.action_space.n]


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("activation_fn", [nn.ReLU, nn.Tanh, nn.ELU])
def test_activation_fn(model_class, activation_fn):
    model = model_class(
        "MlpPolicy", "Pendulum-v1", policy_kwargs=dict(net_arch=[8], activation_fn=activation_fn), **algo_kwargs(model_class)
    )
    assert any(isinstance(m, activation_fn) for m in model.policy.modules())
    model.learn(64)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("optimizer_kwargs", [None, dict(weight_decay=0.0)])
def test_custom_optimizer(model_class, optimizer_kwargs):
    """``optimizer_class`` and ``optimizer_kwargs`` (SB3's ``test_custom_optimizer``)."""
    policy_kwargs = dict(optimizer_class=th.optim.AdamW, optimizer_kwargs=optimizer_kwargs, net_arch=[16])
    model = model_class("MlpPolicy", "Pendulum-v1", policy_kwargs=policy_kwargs, **algo_kwargs(model_class))
    assert isinstance(model.policy.optimizer, th.optim.AdamW)
    model.learn(128)


@algo_params(ALL_ALGOS)
def test_tf_like_rmsprop_optimizer(model_class):
    policy_kwargs = dict(optimizer_class=RMSpropTFLike, net_arch=[16])
    model_class("MlpPolicy", "Pendulum-v1", policy_kwargs=policy_kwargs, **algo_kwargs(model_class)).learn(128)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("share_features_extractor", [True, False])
def test_share_features_extractor_mlp(model_class, share_features_extractor):
    """``share_features_extractor`` with an MlpPolicy (Flatten extractor, no parameters)."""
    policy_kwargs = dict(share_features_extractor=share_features_extractor, net_arch=[16])
    model = model_class("MlpPolicy", "Pendulum-v1", policy_kwargs=policy_kwargs, **algo_kwargs(model_class))
    model.learn(64)


class SmallExtractor(BaseFeaturesExtractor):
    """A features extractor with parameters (a Linear layer and a LayerNorm)."""

    def __init__(self, observation_space: spaces.Box, features_dim: int = 8):
        super().__init__(observation_space, features_dim)
        self.net = nn.Sequential(
            nn.Linear(int(observation_space.shape[0]), features_dim), nn.LayerNorm(features_dim), nn.ReLU()
        )

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.net(observations)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("share_features_extractor", [True, False])
def test_custom_features_extractor(model_class, share_features_extractor):
    """A custom extractor with parameters and kwargs, shared by actor and critic or not (SB3 docs' custom policy)."""
    policy_kwargs = dict(
        features_extractor_class=SmallExtractor,
        features_extractor_kwargs=dict(features_dim=6),
        share_features_extractor=share_features_extractor,
        net_arch=[8],
    )
    model = model_class("MlpPolicy", "Pendulum-v1", policy_kwargs=policy_kwargs, seed=0, **algo_kwargs(model_class))
    extractor = model.policy.features_extractor
    assert isinstance(extractor, SmallExtractor) and extractor.features_dim == 6
    before = {k: v.clone() for k, v in extractor.state_dict().items()}
    model.learn(128)
    # the actor's extractor is trained
    assert any(not th.equal(before[k], v) for k, v in model.policy.features_extractor.state_dict().items())


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("ortho_init", [True, False])
def test_ortho_init_and_log_std_init(model_class, ortho_init):
    policy_kwargs = dict(ortho_init=ortho_init, log_std_init=-1.0, net_arch=[8])
    model = model_class("MlpPolicy", "Pendulum-v1", policy_kwargs=policy_kwargs, **algo_kwargs(model_class))
    assert th.allclose(model.policy.log_std, th.full_like(model.policy.log_std, -1.0))
    model.learn(64)
