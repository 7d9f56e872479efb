"""
ExactTRPO policies: SB3's actor-critic policies with separate actor and critic feature extractors by default.

With separate extractors the critic learns its own features. ``share_features_extractor=True`` is accepted with
sb3-contrib TRPO's meaning: the shared extractor is part of the actor, moved only by the natural-gradient step, and
the critic's regression trains only the critic's own layers on top of it.

Each is the fast actor-critic policy of :mod:`sb3_grpo.common.actor_critic` (SB3's with a cheaper per-step path: same
outputs and random stream).
"""

from __future__ import annotations

from typing import Any

from sb3_grpo.common import actor_critic

__all__ = [
    "ActorCriticCnnPolicy",
    "ActorCriticPolicy",
    "CnnPolicy",
    "MlpPolicy",
    "MultiInputActorCriticPolicy",
    "MultiInputPolicy",
]


class _SeparateExtractorsByDefault:
    """``share_features_extractor=False`` unless given (all other arguments go to the policy unchanged)."""

    def __init__(self, *args: Any, share_features_extractor: bool = False, **kwargs: Any):
        kwargs["share_features_extractor"] = share_features_extractor
        super().__init__(*args, **kwargs)


class ActorCriticPolicy(_SeparateExtractorsByDefault, actor_critic.ActorCriticPolicy):
    """SB3's :class:`~stable_baselines3.common.policies.ActorCriticPolicy` with ``share_features_extractor=False``
    by default (all other arguments unchanged)."""


class ActorCriticCnnPolicy(_SeparateExtractorsByDefault, actor_critic.ActorCriticCnnPolicy):
    """SB3's CNN actor-critic policy with ``share_features_extractor=False`` by default."""


class MultiInputActorCriticPolicy(_SeparateExtractorsByDefault, actor_critic.MultiInputActorCriticPolicy):
    """SB3's dict-observation actor-critic policy with ``share_features_extractor=False`` by default."""


MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy
