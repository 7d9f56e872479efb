"""
rl-zoo (rl_zoo3) integration: train, enjoy and tune ``grpo``, ``exact_trpo`` and ``adaptive_kl_ppo`` with rl-zoo.

From the shell: ``sb3-grpo-zoo train --algo grpo --env CartPole-v1`` (or ``python -m sb3_grpo.zoo train ...``),
with every rl_zoo3 flag; see :mod:`sb3_grpo.zoo.cli`. From Python, call :func:`register` before using rl_zoo3's
``train()``, ``enjoy()`` or ``ExperimentManager`` directly, and pass ``-conf`` / ``config=`` with
:func:`default_config_path` (rl_zoo3 only looks for its own ``hyperparams/{algo}.yml``).
"""

from sb3_grpo.zoo.registry import ALGO_PATHS, UNAVAILABLE, available_algos, default_config_path, register

__all__ = ["ALGO_PATHS", "UNAVAILABLE", "available_algos", "default_config_path", "register"]
