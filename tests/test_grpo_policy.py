"""GRPO's actor-only policy: its parameters are the actor's alone, a critic's net_arch is ignored."""

import pytest
from stable_baselines3 import PPO

from sb3_grpo import GRPO


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_parameter_count_is_the_actor_alone(env_id):
    grpo = GRPO("MlpPolicy", env_id, seed=0, device="cpu")
    ppo = PPO("MlpPolicy", env_id, seed=0, device="cpu")
    actor = sum(p.numel() for name, p in ppo.policy.named_parameters() if "value" not in name)
    assert sum(p.numel() for p in grpo.policy.parameters()) == actor
    assert not any("value" in name for name, _ in grpo.policy.named_parameters())


def test_cnn_policy_parameter_count_is_the_actor_of_ppos_cnn_policy():
    # SB3's default after NatureCNN is no hidden layer (net_arch=[]): the same actor, parameter for parameter.
    from stable_baselines3.common.envs import FakeImageEnv

    env = FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True)
    grpo = GRPO("CnnPolicy", env, seed=0, device="cpu")
    ppo = PPO("CnnPolicy", env, seed=0, device="cpu")
    actor = sum(p.numel() for name, p in ppo.policy.named_parameters() if "value" not in name)
    assert grpo.policy.net_arch == []
    assert sum(p.numel() for p in grpo.policy.parameters()) == actor


def test_vf_net_arch_is_ignored_with_a_warning():
    with pytest.warns(UserWarning, match="no value network"):
        model = GRPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=dict(pi=[16], vf=[32])), device="cpu")
    assert model.policy.net_arch == [16]
