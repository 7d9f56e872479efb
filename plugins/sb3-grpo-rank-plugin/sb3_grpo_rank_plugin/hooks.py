"""The plugin's hooks: the module the ``sb3_grpo`` entry point names. sb3_grpo imports it once, lazily, and calls
each ``@hookimpl`` function with a ``register`` callback."""

from sb3_grpo import hookimpl
from sb3_grpo_rank_plugin.estimators import GroupRank
from sb3_grpo_rank_plugin.rewards import action_smoothness, survival_bonus


@hookimpl
def register_advantage_estimators(register):
    register("group_rank", GroupRank)


@hookimpl
def register_reward_functions(register):
    register("survival_bonus", survival_bonus)
    register("action_smoothness", action_smoothness)
