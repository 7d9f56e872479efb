"""
Modules that moved keep their old import paths.

Saved models pickle objects by the path of their class (an estimator, a reward function, a buffer class), and
plugins and scripts import documented paths, so every module that moves is listed here and its old path is an
alias of the new module: ``import sb3_grpo.common.fisher`` gives ``sb3_grpo.exact_trpo.fisher`` itself (same
module object, same classes), and an object pickled under the old path unpickles as the new class.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["MOVED_MODULES", "alias_moved_modules"]

#: old module path -> the module it is now.
MOVED_MODULES: dict[str, str] = {
    "sb3_grpo.common.fisher": "sb3_grpo.exact_trpo.fisher",
    "sb3_grpo.common.kl_controllers": "sb3_grpo.adaptive_kl_ppo.kl_controllers",
    "sb3_grpo.common.rewards": "sb3_grpo.common.reward_scoring",
    "sb3_grpo.envs.rewards": "sb3_grpo.envs.arithmetic_rewards",
    "sb3_grpo.common.env_hooks": "sb3_grpo.common.groups.env_hooks",
    "sb3_grpo.common.group_sampling": "sb3_grpo.common.groups.scheduler",
    "sb3_grpo.grpo.policies": "sb3_grpo.common.policies",
    # group sampling, shared by GRPO and OnlineDPO
    "sb3_grpo.grpo.env_hooks": "sb3_grpo.common.groups.env_hooks",
    "sb3_grpo.grpo.group_sampling": "sb3_grpo.common.groups.scheduler",
    "sb3_grpo.grpo.rollout": "sb3_grpo.common.groups.collector",
    "sb3_grpo.grpo.branching": "sb3_grpo.common.groups.branching",
    "sb3_grpo.grpo.buffers": "sb3_grpo.common.groups.buffers",
}


def alias_moved_modules() -> None:
    """Make every old path of :data:`MOVED_MODULES` import the module it moved to (run by ``import sb3_grpo``)."""
    for old, new in MOVED_MODULES.items():
        module = importlib.import_module(new)
        sys.modules.setdefault(old, module)
        parent, _, name = old.rpartition(".")
        setattr(importlib.import_module(parent), name, module)
