"""
Verifiable reward functions for :class:`sb3_grpo.envs.arithmetic.ArithmeticEnv`, registered through the same
``register_reward_functions`` hook as every other reward function.

Each reads the last step's ``info`` of a finished trajectory (``answer``, ``target``, ``correct``, ``format_ok``)
and returns one float:

- ``arithmetic_exact_match``: 1.0 if the answer equals the target and ended properly, else 0.0.
- ``arithmetic_format``: 1.0 if the answer is 1 to ``max_answer_digits`` digits without a leading zero, followed by
  end-of-answer, else 0.0.
- ``arithmetic_length_penalty``: ``-|len(answer) - len(target)| / len(target)``, in ``[-1, 0]`` for well-formed answers
  (0 when the answer has the target's number of digits).
- ``arithmetic_prefix_match``: the share of the target's digits the answer gets right from the first one on (the
  length of the common prefix over ``len(target)``): partial credit for a right first digit, which the answer's
  later digits are written after.
- ``arithmetic_digit_match``: the same credit, step by step (process supervision): the step that writes the ``i``-th
  digit gets ``1 / len(target)`` if the answer's first ``i`` digits are right, every other step 0. It sums to
  ``arithmetic_prefix_match``; rewarded at the steps that earned it, it lets a per-step estimator
  (``group_step_baseline``) credit each digit with the credit that follows it.

``GRPO(..., reward_functions=["arithmetic_exact_match", "arithmetic_format", "arithmetic_length_penalty"])``
combines them (weights with ``reward_weights``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sb3_grpo.common.reward_scoring import RewardFunctionError, Trajectory
from sb3_grpo.default_plugins import register_each
from sb3_grpo.hookspecs import hookimpl

__all__ = [
    "ARITHMETIC_REWARD_FUNCTIONS",
    "arithmetic_digit_match",
    "arithmetic_exact_match",
    "arithmetic_format",
    "arithmetic_length_penalty",
    "arithmetic_prefix_match",
]


def _final_info(trajectory: Trajectory, key: str) -> dict[str, Any]:
    last = trajectory.infos[-1] if trajectory.infos else {}
    if key not in last:
        raise RewardFunctionError(
            f"the last step's info has no {key!r} key: this reward function scores sb3_grpo/Arithmetic-v0 answers "
            "(or any env whose final info carries 'answer', 'target', 'correct' and 'format_ok')."
        )
    return last


def arithmetic_exact_match(trajectory: Trajectory) -> float:
    """1.0 if the answer is exactly the target (and was ended with end-of-answer), else 0.0."""
    return float(bool(_final_info(trajectory, "correct")["correct"]))


def arithmetic_format(trajectory: Trajectory) -> float:
    """1.0 for a well-formed answer (digits without a leading zero, then end-of-answer), else 0.0."""
    return float(bool(_final_info(trajectory, "format_ok")["format_ok"]))


def arithmetic_length_penalty(trajectory: Trajectory) -> float:
    """``-|len(answer) - len(target)| / len(target)``: 0 for an answer with as many digits as the target."""
    info = _final_info(trajectory, "answer")
    target = str(info["target"])
    return -abs(len(str(info["answer"])) - len(target)) / max(len(target), 1)


def arithmetic_prefix_match(trajectory: Trajectory) -> float:
    """Length of the common prefix of the answer and the target over ``len(target)``: ``"13"`` for ``"14"`` is 0.5."""
    info = _final_info(trajectory, "answer")
    answer, target = str(info["answer"]), str(info["target"])
    common = 0
    for written, right in zip(answer, target, strict=False):
        if written != right:
            break
        common += 1
    return common / max(len(target), 1)


def arithmetic_digit_match(trajectory: Trajectory) -> np.ndarray:
    """Per-step prefix credit: ``1 / len(target)`` on the step that writes each right digit of a right prefix."""
    info = _final_info(trajectory, "answer")
    answer, target = str(info["answer"]), str(info["target"])
    rewards = np.zeros(trajectory.length, dtype=np.float64)
    for i, (written, right) in enumerate(zip(answer, target, strict=False)):
        if written != right or i >= trajectory.length:
            break
        rewards[i] = 1.0 / max(len(target), 1)
    return rewards


#: The reward functions, each registered under its own name (the name ``reward_functions`` takes).
ARITHMETIC_REWARD_FUNCTIONS = {
    fn.__name__: fn
    for fn in (
        arithmetic_exact_match,
        arithmetic_format,
        arithmetic_length_penalty,
        arithmetic_prefix_match,
        arithmetic_digit_match,
    )
}


@hookimpl
def register_reward_functions(register) -> None:
    register_each(register, ARITHMETIC_REWARD_FUNCTIONS)
