"""
Policies for :class:`~sb3_grpo.adaptive_kl_ppo.AdaptiveKLPPO`: SB3's actor-critic policies, unchanged (the same
networks as PPO's, so PPO ``policy_kwargs`` and checkpoints of the policy carry over).
"""

from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy

__all__ = ["CnnPolicy", "MlpPolicy", "MultiInputPolicy"]

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy
