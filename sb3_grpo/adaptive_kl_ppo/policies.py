"""
Policies for :class:`~sb3_grpo.adaptive_kl_ppo.AdaptiveKLPPO`: SB3's actor-critic policies with the same networks
as PPO's (so PPO ``policy_kwargs`` and checkpoints of the policy carry over), the same outputs and random stream, and
a cheaper per-step path (:class:`~sb3_grpo.common.actor_critic.FastActorCriticMixin`: Categorical and Gaussian actions
sampled without building distribution objects, no torch argument validation).
"""

from stable_baselines3.common import policies as sb3_policies

from sb3_grpo.common.actor_critic import FastActorCriticMixin

__all__ = [
    "ActorCriticCnnPolicy",
    "ActorCriticPolicy",
    "CnnPolicy",
    "MlpPolicy",
    "MultiInputActorCriticPolicy",
    "MultiInputPolicy",
]


class ActorCriticPolicy(FastActorCriticMixin, sb3_policies.ActorCriticPolicy):
    """SB3's :class:`~stable_baselines3.common.policies.ActorCriticPolicy` (same arguments, networks and outputs)
    with the fast per-step path."""


class ActorCriticCnnPolicy(FastActorCriticMixin, sb3_policies.ActorCriticCnnPolicy):
    """SB3's CNN actor-critic policy with the fast per-step path."""


class MultiInputActorCriticPolicy(FastActorCriticMixin, sb3_policies.MultiInputActorCriticPolicy):
    """SB3's dict-observation actor-critic policy with the fast per-step path."""


MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy
