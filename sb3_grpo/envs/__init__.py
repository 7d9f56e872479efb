"""
Gymnasium environments shipped with sb3_grpo, registered under the ``sb3_grpo/`` namespace on import.

- ``sb3_grpo/Arithmetic-v0``: answer ``a+b`` (single digits by default) token by token; a verifiable reward
  scores the finished answer. See :class:`sb3_grpo.envs.arithmetic.ArithmeticEnv`; its reward functions
  (``arithmetic_exact_match``, ``arithmetic_format``, ``arithmetic_length_penalty``) live in
  :mod:`sb3_grpo.envs.arithmetic_rewards`.
- ``sb3_grpo/ArithmeticHeldOut-v0``: two-digit addition (``0..99 + 0..99``) on the training side of a fixed split
  of the 10,000 questions; ``split="test"`` gives the 2,000 held-out ones. Measure generalisation with
  :func:`sb3_grpo.envs.arithmetic.split_accuracy` (every held-out question, greedy answers)::

      from sb3_grpo.envs.arithmetic import HELD_OUT_KWARGS, split_accuracy

      accuracy = split_accuracy(model, "test", **HELD_OUT_KWARGS)

Constructor arguments pass through ``gymnasium.make`` and ``make_vec_env(..., env_kwargs=...)``::

    import gymnasium as gym
    import sb3_grpo.envs  # registers the ids (importing sb3_grpo does it too)

    env = gym.make("sb3_grpo/Arithmetic-v0", task="sequence", reward_mode="sparse")

Without any import: ``gym.make("sb3_grpo.envs:sb3_grpo/Arithmetic-v0")``.
"""

from gymnasium.envs.registration import register, registry

from sb3_grpo.envs.arithmetic import HELD_OUT_KWARGS, ArithmeticEnv, split_accuracy

__all__ = ["ENV_IDS", "HELD_OUT_KWARGS", "ArithmeticEnv", "split_accuracy"]

#: The ids this module registers with gymnasium.
ENV_IDS = ("sb3_grpo/Arithmetic-v0", "sb3_grpo/ArithmeticHeldOut-v0")

if "sb3_grpo/Arithmetic-v0" not in registry:
    register(id="sb3_grpo/Arithmetic-v0", entry_point="sb3_grpo.envs.arithmetic:ArithmeticEnv")
if "sb3_grpo/ArithmeticHeldOut-v0" not in registry:
    register(
        id="sb3_grpo/ArithmeticHeldOut-v0",
        entry_point="sb3_grpo.envs.arithmetic:ArithmeticEnv",
        kwargs={**HELD_OUT_KWARGS, "split": "train"},
    )
