"""
ExactTRPO policies: SB3's actor-critic policies with separate actor and critic feature extractors by default.

With separate extractors the critic learns its own features. ``share_features_extractor=True`` is accepted with
sb3-contrib TRPO's meaning: the shared extractor is part of the actor, moved only by the natural-gradient step, and
the critic's regression trains only the critic's own layers on top of it.

Each has the cheaper per-step path of :class:`~sb3_grpo.common.actor_critic.FastActorCriticMixin` (same outputs and
random stream as SB3's).
"""

from __future__ import annotations

from typing import Any

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
    """SB3's :class:`~stable_baselines3.common.policies.ActorCriticPolicy` with ``share_features_extractor=False``
    by default (all other arguments unchanged)."""

    def __init__(self, *args: Any, share_features_extractor: bool = False, **kwargs: Any):
        kwargs["share_features_extractor"] = share_features_extractor
        super().__init__(*args, **kwargs)


class ActorCriticCnnPolicy(FastActorCriticMixin, sb3_policies.ActorCriticCnnPolicy):
    """SB3's CNN actor-critic policy with ``share_features_extractor=False`` by default."""

    def __init__(self, *args: Any, share_features_extractor: bool = False, **kwargs: Any):
        kwargs["share_features_extractor"] = share_features_extractor
        super().__init__(*args, **kwargs)


class MultiInputActorCriticPolicy(FastActorCriticMixin, sb3_policies.MultiInputActorCriticPolicy):
    """SB3's dict-observation actor-critic policy with ``share_features_extractor=False`` by default."""

    def __init__(self, *args: Any, share_features_extractor: bool = False, **kwargs: Any):
        kwargs["share_features_extractor"] = share_features_extractor
        super().__init__(*args, **kwargs)


MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy
