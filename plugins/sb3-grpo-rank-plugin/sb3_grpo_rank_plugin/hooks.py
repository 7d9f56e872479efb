"""The plugin's hooks: the module the ``sb3_grpo`` entry point names. sb3_grpo imports it once, lazily, and calls
each ``@hookimpl`` function with a ``register`` callback. A function without ``@hookimpl`` (or with another
project's marker) is no hook: sb3_grpo warns that the plugin registers nothing."""

from sb3_grpo import hookimpl

from .estimators import UPGO, GroupRank
from .rewards import action_smoothness, survival_bonus


@hookimpl
def register_advantage_estimators(register):
    register("group_rank", GroupRank)
    register("upgo", UPGO)


@hookimpl
def register_reward_functions(register):
    register("survival_bonus", survival_bonus)
    register("action_smoothness", action_smoothness)
