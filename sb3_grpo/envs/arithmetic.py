"""
A small question-answer environment where GRPO is at home: the policy writes the answer to an arithmetic
question one token at a time, and a verifiable reward function scores the finished answer.

At ``reset`` a question is sampled from the seeded ``np_random`` (``"7+5"`` for ``task="add"``, ``"2,4,6"`` for
``task="sequence"``: continue the arithmetic sequence). Each step the policy emits one answer token: a digit
``0``-``9`` (actions 0-9) or end-of-answer (action 10). The episode ends at end-of-answer, or when the answer
already holds ``max_answer_digits`` digits and the policy emits one more digit (an over-long, ill-formed
answer). Both endings are terminal states of the task (``terminated=True``).

The observation is the token sequence ``question (padded) + answer so far (padded)`` as a ``MultiDiscrete``
vector over the vocabulary :data:`VOCAB` (SB3's ``MlpPolicy`` one-hot encodes it;
:class:`sb3_grpo.common.torch_layers.TokenSequenceExtractor` reads it as a token sequence).

Held-out questions: ``split="train"`` or ``"test"`` restricts the questions to one side of a fixed split of every
question of the task (``test_fraction`` of them go to the test side, chosen by ``split_seed`` alone, so every env
built with the same arguments agrees on the split). Train on ``split="train"``, measure generalisation with
:func:`split_accuracy` on ``split="test"``: questions the policy never saw. ``sb3_grpo/ArithmeticHeldOut-v0`` is
two-digit addition (``0..99 + 0..99``, 10,000 questions) with 20% held out (:data:`HELD_OUT_KWARGS`).

By default the env reward is 0 on every step (``reward_mode="none"``) and the last step's ``info`` carries the
verifiable score for reward functions (``sb3_grpo.envs.arithmetic_rewards``):

- ``info["question"]``, ``info["target"]`` (the correct answer, a string of digits), ``info["answer"]`` (the
  digits emitted), ``info["correct"]`` (exact match, properly ended), ``info["format_ok"]`` (1 to
  ``max_answer_digits`` digits, no leading zero, then end-of-answer), ``info["is_success"]`` (= correct, so the
  built-in ``success`` reward works too).

Two options make the digits line up, which is what a policy that generalises to unseen questions needs (an answer
digit depends on the operand digits of the same place value, and on the carry from the places below):

- ``pad_operands=True``: the observation shows every operand zero-padded to the width of the largest one
  (``"07+45"``), so each place value sits at a fixed position. Questions (``info["question"]``, splits,
  ``reset(options={"question": ...})``) keep their plain form (``"7+45"``).
- ``reverse_answer=True``: the answer is written least-significant digit first (``7+45`` -> ``"25"``, ``99+9`` ->
  ``"801"``), the order in which the digits of a sum are computed: each digit then depends on digits the policy
  has seen or written already. ``info["answer"]`` and ``info["target"]`` are in the written order; a well-formed
  answer has no trailing zero (the reversed number has no leading one).

``reward_mode="sparse"`` puts the exact-match score (1.0 or 0.0) in the env reward of the last step (for
algorithms that learn from env rewards, such as PPO); ``reward_mode="shaped"`` puts there the sum of the three
shipped reward functions (exact match + format + length penalty), the same signal GRPO gets with
``reward_functions=["arithmetic_exact_match", "arithmetic_format", "arithmetic_length_penalty"]``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "EOS",
    "HELD_OUT_KWARGS",
    "PAD",
    "VOCAB",
    "ArithmeticEnv",
    "decode",
    "exact_match_accuracy",
    "score_answer",
    "split_accuracy",
]

#: Token vocabulary: digits 0-9, then operators and separators, end-of-answer and padding.
VOCAB: tuple[str, ...] = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "+", "-", ",", "<eos>", "<pad>")
EOS = VOCAB.index("<eos>")
PAD = VOCAB.index("<pad>")
_TOKEN = {symbol: index for index, symbol in enumerate(VOCAB)}
#: Actions: 0-9 emit that digit, 10 ends the answer.
END_ACTION = 10

TASKS = ("add", "sub", "sequence")
REWARD_MODES = ("none", "sparse", "shaped")
SPLITS = ("train", "test")
_QUESTION_PATTERNS = {"add": r"(\d+)\+(\d+)", "sub": r"(\d+)-(\d+)", "sequence": r"(\d+),(\d+),(\d+)"}
#: A split enumerates every question of the task; more than this many is refused (pick smaller operands).
MAX_SPLIT_QUESTIONS = 2_000_000
#: ``sb3_grpo/ArithmeticHeldOut-v0`` without its ``split``: two-digit addition, 20% of the questions held out.
HELD_OUT_KWARGS: dict[str, Any] = {"task": "add", "max_operand": 99, "test_fraction": 0.2, "split_seed": 0}


def decode(tokens: Any) -> str:
    """Tokens to text, padding dropped: ``decode([7, 10, 5]) == "7+5"``."""
    return "".join(VOCAB[int(t)] for t in np.asarray(tokens).reshape(-1) if int(t) != PAD)


def score_answer(
    answer: str, target: str, ended: bool, max_answer_digits: int, reverse_answer: bool = False
) -> dict[str, Any]:
    """The verifiable score of an answer (the keys this env puts in the last step's info).

    :param answer: the digits emitted.
    :param target: the correct answer (in the order the digits are written).
    :param ended: whether the policy emitted end-of-answer.
    :param max_answer_digits: the longest well-formed answer.
    :param reverse_answer: the digits are written least-significant first (the number is ``answer[::-1]``).
    """
    number = answer[::-1] if reverse_answer else answer
    format_ok = bool(ended and 1 <= len(answer) <= max_answer_digits and (number == "0" or not number.startswith("0")))
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
    :param split: ``None`` (default): questions are drawn as described above. ``"train"`` / ``"test"``: drawn
        uniformly from that side of the split (see :attr:`questions`).
    :param test_fraction: share of the task's questions on the test side (at least one question on each side).
    :param split_seed: seed of the split (a permutation of every question); the same seed gives the same split.
    :param pad_operands: show every operand zero-padded to the width of the largest one (see the module docstring).
    :param reverse_answer: the answer is written least-significant digit first (see the module docstring).
    :param render_mode: ``None``, ``"ansi"`` (``render()`` returns ``"7+5=12"``) or ``"rgb_array"`` (that text
        drawn in a 3x5 pixel font, scaled 4x: for SB3's ``VecVideoRecorder``; ``make_vec_env`` asks for it).
    """

    metadata = {
        "render_modes": ["ansi", "rgb_array"],
        "render_fps": 4,
        # the verifiable rewards GRPO and OnlineDPO score this env with when no reward_functions are given (its own
        # step reward is 0 with reward_mode="none"; the other modes leave this out and score with the env reward)
        "reward_functions": (
            "arithmetic_exact_match",
            "arithmetic_format",
            "arithmetic_length_penalty",
            "arithmetic_prefix_match",
        ),
    }
    observation_space: spaces.MultiDiscrete

    def __init__(
        self,
        task: str = "add",
        max_operand: int = 9,
        max_step: int = 3,
        reward_mode: str = "none",
        render_mode: str | None = None,
        split: str | None = None,
        test_fraction: float = 0.2,
        split_seed: int = 0,
        pad_operands: bool = False,
        reverse_answer: bool = False,
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
        if split is not None and split not in SPLITS:
            raise ValueError(f"split must be None, 'train' or 'test', got {split!r}")
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be strictly between 0 and 1, got {test_fraction!r}")
        self.task = task
        self.max_operand = int(max_operand)
        self.max_step = int(max_step)
        self.reward_mode = reward_mode
        if reward_mode != "none":  # the env reward carries the score: GRPO's default episodic return scores with it
            self.metadata = {key: value for key, value in type(self).metadata.items() if key != "reward_functions"}
        self.render_mode = render_mode
        self.split = split
        self.test_fraction = float(test_fraction)
        self.split_seed = int(split_seed)
        self.pad_operands = bool(pad_operands)
        self.reverse_answer = bool(reverse_answer)
        self._split_questions: tuple[str, ...] | None = None
        if split is not None:
            self._split_questions = self.split_questions(split)

        operand_digits = len(str(self.max_operand))
        #: Width of every term of the question in the observation with ``pad_operands`` (the largest term's).
        self.term_width = operand_digits if task != "sequence" else len(str(self.max_operand + 2 * self.max_step))
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

    def n_questions(self) -> int:
        """How many distinct questions the task has (both sides of a split together)."""
        n = self.max_operand + 1
        if self.task == "add":
            return n * n
        if self.task == "sub":
            return n * (n + 1) // 2
        return n * (self.max_step + 1)

    def all_questions(self) -> list[str]:
        """Every question of the task, in a fixed order (operands ascending)."""
        n = self.max_operand + 1
        if self.task == "add":
            return [f"{a}+{b}" for a in range(n) for b in range(n)]
        if self.task == "sub":
            return [f"{a}-{b}" for a in range(n) for b in range(a + 1)]
        return [f"{x},{x + d},{x + 2 * d}" for x in range(n) for d in range(self.max_step + 1)]

    def split_questions(self, split: str) -> tuple[str, ...]:
        """The questions on one side (``"train"`` or ``"test"``) of this env's split, or ``"all"`` of them.

        The split is a permutation of :meth:`all_questions` drawn from ``numpy.random.default_rng(split_seed)``: its
        first ``round(test_fraction * n)`` questions (at least 1, at most ``n - 1``) are the test side. It depends
        on the task's arguments and ``split_seed`` only, never on the env's ``reset`` seed.
        """
        if split not in (*SPLITS, "all"):
            raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
        n = self.n_questions()
        if n > MAX_SPLIT_QUESTIONS:
            raise ValueError(
                f"this task has {n:,} questions, too many to split (at most {MAX_SPLIT_QUESTIONS:,}): "
                "lower max_operand (or max_step), or use split=None."
            )
        questions = self.all_questions()
        if split == "all":
            return tuple(questions)
        if n < 2:
            raise ValueError(f"a split needs at least 2 questions, this task has {n}: raise max_operand.")
        order = np.random.default_rng(self.split_seed).permutation(n)
        n_test = min(max(round(self.test_fraction * n), 1), n - 1)
        side = order[:n_test] if split == "test" else order[n_test:]
        return tuple(questions[i] for i in np.sort(side))

    @property
    def questions(self) -> tuple[str, ...] | None:
        """The questions ``reset`` draws from with a split (``None`` without one)."""
        return self._split_questions

    def solve(self, question: str) -> str:
        """The correct answer to ``question``; a :class:`ValueError` if it is not a question of this task."""
        match = re.fullmatch(_QUESTION_PATTERNS[self.task], question)
        texts = match.groups() if match else ()
        values = [int(text) for text in texts]
        if match and all(str(value) == text for value, text in zip(values, texts, strict=True)):  # no leading zeros
            if self.task == "sequence":
                x, y, z = values
                if x <= self.max_operand and 0 <= y - x <= self.max_step and z == x + 2 * (y - x):
                    return str(x + 3 * (y - x))
            else:
                a, b = values
                if max(a, b) <= self.max_operand and (self.task == "add" or a >= b):
                    return str(a + b if self.task == "add" else a - b)
        raise ValueError(
            f"{question!r} is not a question of this env (task={self.task!r}, max_operand={self.max_operand}"
            + (f", max_step={self.max_step})" if self.task == "sequence" else ")")
        )

    def _sample_question(self) -> tuple[str, str]:
        rng = self.np_random
        if self._split_questions is not None:
            question = self._split_questions[int(rng.integers(len(self._split_questions)))]
            return question, self.solve(question)
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

    def shown_question(self, question: str) -> str:
        """The question as the observation shows it: with ``pad_operands``, every term zero-padded (``"07+45"``)."""
        if not self.pad_operands:
            return question
        return re.sub(r"\d+", lambda match: match.group(0).zfill(self.term_width), question)

    def _observation(self) -> np.ndarray:
        obs = np.full(self.observation_space.shape, PAD, dtype=np.int64)
        question = self._tokenize(self.shown_question(self._question))
        obs[: len(question)] = question
        answer = self._tokenize(self._answer)
        obs[self.question_length : self.question_length + len(answer)] = answer
        return obs

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new question: drawn from the seeded ``np_random``, or ``options={"question": "7+5"}`` to ask that
        one (any question of the task, on either side of a split: that is how :func:`split_accuracy` asks)."""
        super().reset(seed=seed)
        if options and "question" in options:
            self._question = str(options["question"])
            self._target = self.solve(self._question)
        else:
            self._question, self._target = self._sample_question()
        if self.reverse_answer:
            self._target = self._target[::-1]
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
            info.update(score_answer(self._answer, self._target, ended, self.max_answer_digits, self.reverse_answer))
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


def split_accuracy(
    model: Any,
    split: str = "test",
    deterministic: bool = True,
    batch_size: int = 512,
    questions: Sequence[str] | None = None,
    **env_kwargs: Any,
) -> float:
    """Exact-match accuracy over every question of a split, each asked once (greedy answers by default).

    Unlike :func:`exact_match_accuracy`, nothing is sampled: the result is the accuracy on the whole split. The
    questions are answered ``batch_size`` at a time (one ``model.predict`` call per answer token for the batch).

    :param model: anything with SB3's ``predict(observations, deterministic=...)`` for a batch of observations.
    :param split: ``"test"`` (the held-out questions), ``"train"``, or ``"all"`` (every question of the task).
    :param questions: ask these questions instead of a split's.
    :param env_kwargs: arguments of :class:`ArithmeticEnv` (``task``, ``max_operand``, ``test_fraction``,
        ``split_seed``, ...; its own ``split`` is ignored), e.g. ``**HELD_OUT_KWARGS`` for
        ``sb3_grpo/ArithmeticHeldOut-v0``.
    :return: the fraction answered exactly right.
    """
    env_kwargs = {k: v for k, v in env_kwargs.items() if k not in ("split", "render_mode")}
    if questions is None:
        questions = ArithmeticEnv(**env_kwargs).split_questions(split)
    questions = list(questions)
    if not questions:
        raise ValueError("no questions to ask")
    pool = [ArithmeticEnv(**env_kwargs) for _ in range(min(batch_size, len(questions)))]
    correct = 0
    for start in range(0, len(questions), len(pool)):
        chunk = questions[start : start + len(pool)]
        envs = pool[: len(chunk)]
        obs = np.stack([env.reset(options={"question": q})[0] for env, q in zip(envs, chunk, strict=True)])
        active = list(range(len(chunk)))
        while active:
            actions, _ = model.predict(obs[active], deterministic=deterministic)
            running = []
            for i, action in zip(active, np.asarray(actions).reshape(len(active), -1), strict=True):
                obs[i], _, terminated, truncated, info = envs[i].step(action)
                if terminated or truncated:
                    correct += bool(info["correct"])
                else:
                    running.append(i)
            active = running
    return correct / len(questions)
