"""
Old module paths that saved files still name.

A saved model pickles some objects by the path of their class. The files of sb3_grpo 0.1.0 that
``tests/data/`` keeps (``grpo_0.1.0_cartpole.zip``) name the policy class as
``sb3_grpo.grpo.policies.ActorPolicy``, a module that is now ``sb3_grpo.common.policies``; that old path is an
alias of the new module (same module object, same classes), so such a file unpickles its policy class as the
current one. Listed: the paths that a committed file needs (load each file of ``tests/data/`` with an alias removed
to check; ``tests/test_saved_models.py`` loads them) and those of 0.1.0 under which a user's file can hold objects.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["MOVED_MODULES", "alias_moved_modules"]

#: old module path -> the module it is now.
MOVED_MODULES: dict[str, str] = {
    "sb3_grpo.grpo.policies": "sb3_grpo.common.policies",  # policy_class of tests/data/grpo_0.1.0_cartpole.zip
    # 0.1.0's home of the question-answer reward functions: a file whose reward_functions were given as these
    # callables (not by name) pickles them by this path
    "sb3_grpo.envs.rewards": "sb3_grpo.envs.arithmetic_rewards",
}


def alias_moved_modules() -> None:
    """Make every old path of :data:`MOVED_MODULES` import the module it moved to (run by ``import sb3_grpo``)."""
    for old, new in MOVED_MODULES.items():
        module = importlib.import_module(new)
        sys.modules.setdefault(old, module)
        parent, _, name = old.rpartition(".")
        setattr(importlib.import_module(parent), name, module)
