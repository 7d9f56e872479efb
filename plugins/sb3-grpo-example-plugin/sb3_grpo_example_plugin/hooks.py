"""The module the ``sb3_grpo`` entry point names: the ``@hookimpl`` functions."""

from sb3_grpo import hookimpl

from . import CappedRatio, GroupMedian, episode_length


@hookimpl
def register_advantage_estimators(register):
    register("example_group_median", GroupMedian)


@hookimpl
def register_reward_functions(register):
    register("example_episode_length", episode_length)


@hookimpl
def register_policy_losses(register):
    register("example_capped_ratio", CappedRatio)
