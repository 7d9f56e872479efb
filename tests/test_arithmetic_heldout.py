"""Held-out questions for the arithmetic env: the split, asking a given question, split_accuracy, the registered id."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sb3_grpo.envs  # noqa: F401  (registers the ids)
from sb3_grpo.envs.arithmetic import HELD_OUT_KWARGS, ArithmeticEnv, decode, split_accuracy

END = 10


def hand_solve(question):
    if "," in question:
        x, y, _ = (int(v) for v in question.split(","))
        return str(x + 3 * (y - x))
    if "+" in question:
        a, b = question.split("+")
        return str(int(a) + int(b))
    a, b = question.split("-")
    return str(int(a) - int(b))


class Oracle:
    """Answers right the questions in ``known`` (all by default) and writes 0 to the others; batched ``predict``."""

    def __init__(self, env, known=None):
        self.env, self.known = env, known

    def _action(self, obs):
        question = decode(obs[: self.env.question_length])
        written = decode(obs[self.env.question_length :])
        target = hand_solve(question) if self.known is None or question in self.known else "0"
        return END if written == target else int(target[len(written)])

    def predict(self, obs, deterministic=True):
        obs = np.asarray(obs)
        if obs.ndim == 1:
            return self._action(obs), None
        return np.array([self._action(o) for o in obs]), None


def test_arithmetic_v0_questions_unchanged():
    """Without a split the questions are drawn exactly as before the split existed (seeded runs stay the same)."""
    expected = {
        "add": ["8+6", "4+5", "8+2", "8+0", "7+9", "6+8"],
        "sub": ["8-6", "5-4", "8-2", "8-0", "9-7", "8-6"],
        "sequence": ["8,10,12", "4,6,8", "8,9,10", "8,8,8", "7,10,13", "6,9,12"],
    }
    for task, questions in expected.items():
        env = ArithmeticEnv(task=task)
        assert [env.reset(seed=s)[1]["question"] for s in range(6)] == questions
        assert env.questions is None


@pytest.mark.parametrize(("task", "n"), [("add", 100), ("sub", 55), ("sequence", 40)])
def test_all_questions_by_hand(task, n):
    env = ArithmeticEnv(task=task)
    questions = env.all_questions()
    assert len(questions) == len(set(questions)) == env.n_questions() == n
    for question in questions:
        assert env.solve(question) == hand_solve(question)
    if task == "sub":
        assert all(int(q.split("-")[0]) >= int(q.split("-")[1]) for q in questions)


def test_split_is_deterministic_disjoint_and_complete():
    env = ArithmeticEnv(**HELD_OUT_KWARGS)
    train, test = env.split_questions("train"), env.split_questions("test")
    assert len(test) == 2000 and len(train) == 8000
    assert not set(train) & set(test)
    assert set(train) | set(test) == set(env.all_questions())
    again = ArithmeticEnv(**HELD_OUT_KWARGS, split="test")
    assert again.questions == test  # same arguments, same split, whatever the env's reset seed
    other = ArithmeticEnv(**{**HELD_OUT_KWARGS, "split_seed": 1}).split_questions("test")
    assert len(other) == 2000 and set(other) != set(test)
    small = ArithmeticEnv(test_fraction=0.001)  # 100 questions: still one held out
    assert len(small.split_questions("test")) == 1 and len(small.split_questions("train")) == 99


@pytest.mark.parametrize("split", ["train", "test"])
def test_reset_draws_from_its_side_only(split):
    env = ArithmeticEnv(test_fraction=0.3, split=split)
    side = set(env.questions)
    assert len(side) == (30 if split == "test" else 70)
    seen = {env.reset(seed=s)[1]["question"] for s in range(500)}
    assert seen <= side and len(seen) > 0.9 * len(side)
    np.testing.assert_array_equal(env.reset(seed=7)[0], env.reset(seed=7)[0])


def test_reset_with_a_given_question():
    env = ArithmeticEnv(max_operand=99, split="train")
    obs, info = env.reset(options={"question": "47+5"})
    assert info["question"] == "47+5" and decode(obs) == "47+5"
    for ch in "52":
        env.step(int(ch))
    assert env.step(END)[4]["correct"]
    for bad in ["47+100", "047+5", "4+x", "3-4", "", "1,2,3"]:
        with pytest.raises(ValueError, match="not a question"):
            env.reset(options={"question": bad})
    with pytest.raises(ValueError, match="not a question"):
        ArithmeticEnv(task="sub").reset(options={"question": "3-4"})
    assert ArithmeticEnv(task="sequence").solve("2,4,6") == "8"
    with pytest.raises(ValueError, match="max_step"):
        ArithmeticEnv(task="sequence").solve("2,7,12")  # d = 5 > max_step


def test_bad_split_arguments():
    with pytest.raises(ValueError, match="split"):
        ArithmeticEnv(split="validation")
    for fraction in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="test_fraction"):
            ArithmeticEnv(test_fraction=fraction)
    with pytest.raises(ValueError, match="too many"):
        ArithmeticEnv(max_operand=9999, split="train")
    with pytest.raises(ValueError, match="'train', 'test' or 'all'"):
        ArithmeticEnv().split_questions("validation")


def test_split_accuracy_with_oracles():
    env = ArithmeticEnv(**HELD_OUT_KWARGS)
    train = set(env.split_questions("train"))
    memoriser = Oracle(env, known=train)  # right on every training question, wrong on the others
    assert split_accuracy(memoriser, "train", **HELD_OUT_KWARGS) == 1.0
    assert split_accuracy(memoriser, "test", batch_size=300, **HELD_OUT_KWARGS) == pytest.approx(
        sum(hand_solve(q) == "0" for q in env.split_questions("test")) / 2000
    )
    assert split_accuracy(Oracle(env), "test", **HELD_OUT_KWARGS) == 1.0
    small = ArithmeticEnv()
    half = set(small.all_questions()[:37])
    assert split_accuracy(Oracle(small, known=half), "all", batch_size=8) == pytest.approx(
        (37 + sum(hand_solve(q) == "0" for q in small.all_questions()[37:])) / 100
    )
    assert split_accuracy(Oracle(small), questions=["1+1", "9+9"]) == 1.0
    with pytest.raises(ValueError, match="no questions"):
        split_accuracy(Oracle(small), questions=[])


@pytest.mark.parametrize("split", ["train", "test"])
def test_registered_held_out_env(split):
    env = gym.make("sb3_grpo/ArithmeticHeldOut-v0", split=split)
    check_env(env.unwrapped)
    assert env.unwrapped.questions == ArithmeticEnv(**HELD_OUT_KWARGS).split_questions(split)
    assert env.unwrapped.max_answer_digits == 3 and env.observation_space.shape == (8,)


def test_grpo_trains_on_the_training_side_only():
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_grpo import GRPO

    class Questions(BaseCallback):
        def __init__(self):
            super().__init__()
            self.seen = set()

        def _on_step(self):
            self.seen |= {info["question"] for info in self.locals["infos"]}
            return True

    env = make_vec_env("sb3_grpo/ArithmeticHeldOut-v0", n_envs=4, seed=0)
    model = GRPO("MlpPolicy", env, reward_functions=["arithmetic_exact_match"], group_size=4, n_steps=32, seed=0)
    questions = Questions()
    model.learn(400, callback=questions)
    split = ArithmeticEnv(**HELD_OUT_KWARGS)
    assert len(questions.seen) > 20
    assert questions.seen <= set(split.split_questions("train"))
