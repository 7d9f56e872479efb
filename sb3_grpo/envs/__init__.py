"""
Gymnasium environments shipped with sb3_grpo, registered under the ``sb3_grpo/`` namespace on import.

- ``sb3_grpo/Arithmetic-v0``: answer ``a+b`` (single digits by default) token by token; a verifiable reward
  scores the finished answer. See :class:`sb3_grpo.envs.arithmetic.ArithmeticEnv`; its reward functions
  (``arithmetic_exact_match``, ``arithmetic_format``, ``arithmetic_length_penalty``) live in
  :mod:`sb3_grpo.envs.arithmetic_rewards`.

Constructor arguments pass through ``gymnasium.make`` and ``make_vec_env(..., env_kwargs=...)``::

    import gymnasium as gym
    import sb3_grpo.envs  # registers the ids (importing sb3_grpo does it too)

    env = gym.make("sb3_grpo/Arithmetic-v0", task="sequence", reward_mode="sparse")

Without any import: ``gym.make("sb3_grpo.envs:sb3_grpo/Arithmetic-v0")``.
"""

from gymnasium.envs.registration import register, registry

from sb3_grpo.envs.arithmetic import ArithmeticEnv

__all__ = ["ENV_IDS", "ArithmeticEnv"]

#: The ids this module registers with gymnasium.
ENV_IDS = ("sb3_grpo/Arithmetic-v0",)

if "sb3_grpo/Arithmetic-v0" not in registry:
    register(id="sb3_grpo/Arithmetic-v0", entry_point="sb3_grpo.envs.arithmetic:ArithmeticEnv")
