"""
A small question-answer environment where GRPO is at home: the policy writes the answer to an arithmetic
question one token at a time, and a verifiable reward function scores the finished answer.

At ``reset`` a question is sampled from the seeded ``np_random`` (``"7+5"`` for ``task="add"``, ``"2,4,6"`` for
``task="sequence"``: continue the arithmetic sequence). Each step the policy emits one answer token: a digit
``0``-``9`` (actions 0-9) or end-of-answer (action 10). The episode ends at end-of-answer, or when the answer
already holds ``max_answer_digits`` digits and the policy emits one more digit (an over-long, ill-formed
answer). Both endings are terminal states of the task (``terminated=True``).

The observation is the token sequence ``question (padded) + answer so far (padded)`` as a ``MultiDiscrete``
vector over the vocabulary :data:`VOCAB` (SB3's ``MlpPolicy`` one-hot encodes it).

By default the env reward is 0 on every step (``reward_mode="none"``) and the last step's ``info`` carries the
verifiable score for reward functions (``sb3_grpo.envs.arithmetic_rewards``):

- ``info["question"]``, ``info["target"]`` (the correct answer, a string of digits), ``info["answer"]`` (the
  digits emitted), ``info["correct"]`` (exact match, properly ended), ``info["format_ok"]`` (1 to
  ``max_answer_digits`` digits, no leading zero, then end-of-answer), ``info["is_success"]`` (= correct, so the
  built-in ``success`` reward works too).

``reward_mode="sparse"`` puts the exact-match score (1.0 or 0.0) in the env reward of the last step (for
algorithms that learn from env rewards, such as PPO); ``reward_mode="shaped"`` puts there the sum of the three
shipped reward functions (exact match + format + length penalty), the same signal GRPO gets with
``reward_functions=["arithmetic_exact_match", "arithmetic_format", "arithmetic_length_penalty"]``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["EOS", "PAD", "VOCAB", "ArithmeticEnv", "decode", "exact_match_accuracy", "score_answer"]

#: Token vocabulary: digits 0-9, then operators and separators, end-of-answer and padding.
VOCAB: tuple[str, ...] = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "+", "-", ",", "<eos>", "<pad>")
EOS = VOCAB.index("<eos>")
PAD = VOCAB.index("<pad>")
_TOKEN = {symbol: index for index, symbol in enumerate(VOCAB)}
#: Actions: 0-9 emit that digit, 10 ends the answer.
END_ACTION = 10

TASKS = ("add", "sub", "sequence")
REWARD_MODES = ("none", "sparse", "shaped")


def decode(tokens: Any) -> str:
    """Tokens to text, padding dropped: ``decode([7, 10, 5]) == "7+5"``."""
    return "".join(VOCAB[int(t)] for t in np.asarray(tokens).reshape(-1) if int(t) != PAD)


def score_answer(answer: str, target: str, ended: bool, max_answer_digits: int) -> dict[str, Any]:
    """The verifiable score of an answer (the keys this env puts in the last step's info).

    :param answer: the digits emitted.
    :param target: the correct answer.
    :param ended: whether the policy emitted end-of-answer.
    :param max_answer_digits: the longest well-formed answer.
    """
    format_ok = bool(ended and 1 <= len(answer) <= max_answer_digits and (answer == "0" or not answer.startswith("0")))
    correct = bool(format_ok and answer == target)
    return {"answer": answer, "target": target, "format_ok": format_ok, "correct": correct, "is_success": correct}


def shaped_score(info: dict[str, Any]) -> float:
    """Exact match + format + length penalty, as the three shipped reward functions compute them."""
    length_penalty = -abs(len(info["answer"]) - len(info["target"])) / max(len(info["target"]), 1)
    return float(info["correct"]) + float(info["format_ok"]) + length_penalty


class ArithmeticEnv(gym.Env):
    """
    Answer an arithmetic question token by token (see the module docstring).

    :param task: ``"add"`` (``a+b``), ``"sub"`` (``a-b`` with ``a >= b``) or ``"sequence"`` (three terms of an
        arithmetic sequence ``x, x+d, x+2d``; answer ``x+3d``).
    :param max_operand: operands (and the sequence's first term) are drawn from ``0..max_operand``.
    :param max_step: the sequence's difference ``d`` is drawn from ``0..max_step`` (``task="sequence"``).
    :param reward_mode: ``"none"`` (reward 0 everywhere, the score is in ``info``), ``"sparse"`` (exact match on
        the last step) or ``"shaped"`` (exact match + format + length penalty on the last step).
    :param render_mode: ``None``, ``"ansi"`` (``render()`` returns ``"7+5=12"``) or ``"rgb_array"`` (that text
        drawn in a 3x5 pixel font, scaled 4x: for SB3's ``VecVideoRecorder``; ``make_vec_env`` asks for it).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    observation_space: spaces.MultiDiscrete

    def __init__(
        self,
        task: str = "add",
        max_operand: int = 9,
        max_step: int = 3,
        reward_mode: str = "none",
        render_mode: str | None = None,
    ):
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {reward_mode!r}")
        if int(max_operand) != max_operand or max_operand < 1:
            raise ValueError(f"max_operand must be an integer >= 1, got {max_operand!r}")
        if int(max_step) != max_step or max_step < 0:
            raise ValueError(f"max_step must be an integer >= 0, got {max_step!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None, 'ansi' or 'rgb_array', got {render_mode!r}")
        self.task = task
        self.max_operand = int(max_operand)
        self.max_step = int(max_step)
        self.reward_mode = reward_mode
        self.render_mode = render_mode

        operand_digits = len(str(self.max_operand))
        if task == "add":
            largest_answer = 2 * self.max_operand
            self.question_length = 2 * operand_digits + 1
        elif task == "sub":
            largest_answer = self.max_operand
            self.question_length = 2 * operand_digits + 1
        else:
            largest_answer = self.max_operand + 3 * self.max_step
            self.question_length = 3 * len(str(self.max_operand + 2 * self.max_step)) + 2
        self.max_answer_digits = len(str(largest_answer))
        #: Longest episode: every digit, then end-of-answer (or one digit too many).
        self.max_episode_length = self.max_answer_digits + 1

        self.observation_space = spaces.MultiDiscrete(np.full(self.question_length + self.max_answer_digits, len(VOCAB)))
        self.action_space = spaces.Discrete(END_ACTION + 1)

        self._question = ""
        self._target = ""
        self._answer = ""
        self._done = True
        self._obs = np.full(self.observation_space.shape, PAD, dtype=np.int64)

    # ------------------------------------------------------------------ questions

    def _sample_question(self) -> tuple[str, str]:
        rng = self.np_random
        if self.task == "add":
            a, b = (int(x) for x in rng.integers(0, self.max_operand + 1, size=2))
            return f"{a}+{b}", str(a + b)
        if self.task == "sub":
            a, b = sorted((int(x) for x in rng.integers(0, self.max_operand + 1, size=2)), reverse=True)
            return f"{a}-{b}", str(a - b)
        x = int(rng.integers(0, self.max_operand + 1))
        d = int(rng.integers(0, self.max_step + 1))
        return f"{x},{x + d},{x + 2 * d}", str(x + 3 * d)

    @staticmethod
    def _tokenize(text: str) -> list[int]:
        return [_TOKEN[ch] for ch in text]

    def _observation(self) -> np.ndarray:
        obs = np.full(self.observation_space.shape, PAD, dtype=np.int64)
        question = self._tokenize(self._question)
        obs[: len(question)] = question
        answer = self._tokenize(self._answer)
        obs[self.question_length : self.question_length + len(answer)] = answer
        return obs

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._question, self._target = self._sample_question()
        self._answer = ""
        self._done = False
        return self._observation(), {"question": self._question}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError("step() called on a finished episode: call reset() first.")
        action = int(np.asarray(action).reshape(-1)[0])
        if not 0 <= action <= END_ACTION:
            raise ValueError(f"action must be in 0..{END_ACTION}, got {action}")
        info: dict[str, Any] = {"question": self._question}
        if action == END_ACTION:
            ended, self._done = True, True
        else:
            self._answer += str(action)
            ended = False
            self._done = len(self._answer) > self.max_answer_digits  # one digit too many
        reward = 0.0
        if self._done:
            info.update(score_answer(self._answer, self._target, ended, self.max_answer_digits))
            if self.reward_mode == "sparse":
                reward = float(info["correct"])
            elif self.reward_mode == "shaped":
                reward = shaped_score(info)
            obs = self._observation_clipped()
        else:
            obs = self._observation()
        return obs, reward, self._done, False, info

    def _observation_clipped(self) -> np.ndarray:
        # An over-long answer does not fit in the observation: show its first max_answer_digits digits.
        answer, self._answer = self._answer, self._answer[: self.max_answer_digits]
        try:
            return self._observation()
        finally:
            self._answer = answer

    def render(self) -> str | np.ndarray | None:
        text = f"{self._question}={self._answer}"
        if self.render_mode == "ansi":
            return text
        if self.render_mode == "rgb_array":
            return render_text(text)
        return None


# 3x5 pixel glyphs, one string of 15 bits (row by row) per character.
_GLYPHS = {
    "0": "111101101101111",
    "1": "010110010010111",
    "2": "111001111100111",
    "3": "111001111001111",
    "4": "101101111001001",
    "5": "111100111001111",
    "6": "111100111101111",
    "7": "111001001001001",
    "8": "111101111101111",
    "9": "111101111001111",
    "+": "000010111010000",
    "-": "000000111000000",
    ",": "000000000010100",
    "=": "000111000111000",
}


def render_text(text: str, scale: int = 4) -> np.ndarray:
    """``text`` (digits and ``+-,=``) as a white-on-black ``uint8`` RGB image, ``(7 * scale, 4 * n * scale, 3)``."""
    width = max(4 * len(text) + 1, 8)
    image = np.zeros((7, width), dtype=np.uint8)
    for i, ch in enumerate(text):
        glyph = _GLYPHS.get(ch)
        if glyph is not None:
            image[1:6, 1 + 4 * i : 4 + 4 * i] = np.array([int(b) for b in glyph], dtype=np.uint8).reshape(5, 3) * 255
    image = np.kron(image, np.ones((scale, scale), dtype=np.uint8))
    return np.repeat(image[:, :, None], 3, axis=2)


def exact_match_accuracy(
    model: Any, n_episodes: int = 200, seed: int = 10_000, deterministic: bool = True, **env_kwargs: Any
) -> float:
    """Fraction of ``n_episodes`` fresh questions a model answers exactly (greedy answers by default).

    :param model: anything with SB3's ``predict(observation, deterministic=...)``.
    :param n_episodes: questions to ask; episode ``i`` is reset with ``seed + i``.
    :param env_kwargs: arguments of :class:`ArithmeticEnv` (``task``, ``max_operand``, ...).
    """
    env = ArithmeticEnv(**env_kwargs)
    correct = 0
    for i in range(n_episodes):
        obs, _ = env.reset(seed=seed + i)
        done = False
        info: dict[str, Any] = {}
        while not done:
            action, _ = model.predict(obs, deterministic=deterministic)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        correct += bool(info["correct"])
    return correct / n_episodes
