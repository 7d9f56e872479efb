"""
Policies for :class:`~sb3_grpo.adaptive_kl_ppo.AdaptiveKLPPO`: SB3's actor-critic policies with the same networks
as PPO's (so PPO ``policy_kwargs`` and checkpoints of the policy carry over), the same outputs and random stream, and
a cheaper per-step path (:mod:`sb3_grpo.common.actor_critic`: Categorical and Gaussian actions sampled without
building distribution objects, no torch argument validation).
"""

# The classes are importable from here as well: models saved while they lived here name them by this module.
from sb3_grpo.common.actor_critic import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy

__all__ = ["CnnPolicy", "MlpPolicy", "MultiInputPolicy"]

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy
