"""sb3-grpo-rank-plugin: rank-based group advantages (``group_rank``) and two reward functions
(``survival_bonus``, ``action_smoothness``) for sb3_grpo. The hooks live in :mod:`sb3_grpo_rank_plugin.hooks`."""

from sb3_grpo_rank_plugin.estimators import GroupRank, average_ranks
from sb3_grpo_rank_plugin.rewards import action_smoothness, survival_bonus

__all__ = ["GroupRank", "action_smoothness", "average_ranks", "survival_bonus"]
__version__ = "0.1.0"
