"""sb3-grpo-rank-plugin: rank-based group advantages (``group_rank``, GRPO), the upgoing policy update (``upgo``,
ExactTRPO and AdaptiveKLPPO) and two reward functions (``survival_bonus``, ``action_smoothness``) for sb3_grpo.
The hooks live in :mod:`sb3_grpo_rank_plugin.hooks`, the module the entry point names."""

from .estimators import UPGO, GroupRank, average_ranks
from .rewards import action_smoothness, survival_bonus

__all__ = ["UPGO", "GroupRank", "action_smoothness", "average_ranks", "survival_bonus"]
__version__ = "0.1.0"
