"""sb3_grpo/Arithmetic-v0: seeded questions, verifiable scoring, episode ends, reward functions, env checker."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sb3_grpo.envs  # noqa: F401  (registers the ids)
from sb3_grpo import Trajectory
from sb3_grpo.envs.arithmetic import EOS, PAD, ArithmeticEnv, decode, exact_match_accuracy, score_answer, split_accuracy
from sb3_grpo.envs.arithmetic_rewards import (
    arithmetic_digit_match,
    arithmetic_exact_match,
    arithmetic_format,
    arithmetic_length_penalty,
    arithmetic_prefix_match,
)

END = 10  # the end-of-answer action


def answer(env, text, end=True):
    """Emit the digits of ``text`` (then end-of-answer); return the last step's outputs."""
    out = None
    for ch in text:
        out = env.step(int(ch))
        if out[2]:
            return out
    if end:
        out = env.step(END)
    return out


def solve(question):
    if "," in question:
        x, y, _ = (int(v) for v in question.split(","))
        return str(x + 3 * (y - x))
    if "+" in question:
        a, b = question.split("+")
        return str(int(a) + int(b))
    a, b = question.split("-")
    return str(int(a) - int(b))


def test_seeded_reset_is_reproducible():
    env_a, env_b = ArithmeticEnv(), ArithmeticEnv()
    for seed in range(20):
        obs_a, info_a = env_a.reset(seed=seed)
        env_b.reset(seed=seed + 1000)
        obs_b, info_b = env_b.reset(seed=seed)
        np.testing.assert_array_equal(obs_a, obs_b)
        assert info_a == info_b
    questions = {ArithmeticEnv().reset(seed=s)[1]["question"] for s in range(200)}
    assert len(questions) > 50  # a+b with a, b in 0..9: 100 questions


def test_observation_encodes_question_and_answer_so_far():
    env = ArithmeticEnv()
    obs, info = env.reset(seed=3)
    assert obs.shape == (5,) and env.observation_space.contains(obs)
    assert decode(obs) == info["question"] and obs[3] == PAD and obs[4] == PAD
    obs, reward, terminated, truncated, _ = env.step(1)
    assert decode(obs[3:]) == "1" and reward == 0.0 and not terminated and not truncated
    assert EOS not in obs


def test_scoring_by_hand():
    env = ArithmeticEnv()
    for seed in range(30):
        _, info = env.reset(seed=seed)
        target = solve(info["question"])
        _, reward, terminated, truncated, last = answer(env, target)
        assert terminated and not truncated and reward == 0.0
        assert last["correct"] and last["is_success"] and last["format_ok"]
        assert last["answer"] == last["target"] == target

        env.reset(seed=seed)
        wrong = str((int(target) + 1) % 10)
        _, _, terminated, _, last = answer(env, wrong)
        assert terminated and not last["correct"] and last["format_ok"] and last["answer"] == wrong


def test_format_rules():
    assert score_answer("12", "12", True, 2) == {
        "answer": "12",
        "target": "12",
        "format_ok": True,
        "correct": True,
        "is_success": True,
    }
    assert score_answer("0", "0", True, 2)["correct"]
    assert not score_answer("07", "7", True, 2)["format_ok"]  # leading zero
    assert not score_answer("", "7", True, 2)["format_ok"]  # empty answer
    assert not score_answer("7", "7", False, 2)["correct"]  # never ended
    assert not score_answer("123", "123", True, 2)["format_ok"]  # too long


@pytest.mark.parametrize("task", ["add", "sub", "sequence"])
def test_episode_ends(task):
    env = ArithmeticEnv(task=task)
    env.reset(seed=0)
    _, _, terminated, _, info = env.step(END)  # empty answer
    assert terminated and info["answer"] == "" and not info["format_ok"] and not info["correct"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    lengths = 0
    terminated = False
    while not terminated:  # digits only: ends one digit past the longest answer
        obs, _, terminated, _, info = env.step(1)
        lengths += 1
        assert env.observation_space.contains(obs)
    assert lengths == env.max_answer_digits + 1 == env.max_episode_length
    assert not info["format_ok"] and not info["correct"]


@pytest.mark.parametrize("task", ["add", "sub", "sequence"])
def test_tasks_score_correct_answers(task):
    env = ArithmeticEnv(task=task, max_operand=20)
    for seed in range(20):
        _, info = env.reset(seed=seed)
        assert answer(env, solve(info["question"]))[4]["correct"]


def test_reward_modes():
    for mode, right, wrong in [("none", 0.0, 0.0), ("sparse", 1.0, 0.0), ("shaped", 2.0, 1.0)]:
        env = ArithmeticEnv(reward_mode=mode)
        _, info = env.reset(seed=1)
        target = solve(info["question"])
        assert answer(env, target)[1] == right
        env.reset(seed=1)
        assert answer(env, str((int(target) + 1) % 10) * len(target))[1] == wrong
    env = ArithmeticEnv(reward_mode="shaped")
    _, info = env.reset(seed=1)
    assert answer(env, "", end=True)[1] == pytest.approx(-1.0 / len(solve(info["question"])))
    with pytest.raises(ValueError, match="reward_mode"):
        ArithmeticEnv(reward_mode="dense")


def _trajectory(info, length=2):
    return Trajectory(
        observations=np.zeros((length, 5)),
        actions=np.zeros(length),
        rewards=np.zeros(length),
        infos=[{}] * (length - 1) + [info],
        terminated=True,
        truncated=False,
    )


def test_reward_functions_by_hand():
    right = _trajectory(score_answer("12", "12", True, 2), 3)
    wrong = _trajectory(score_answer("13", "12", True, 2), 3)
    short = _trajectory(score_answer("1", "12", True, 2), 2)
    overlong = _trajectory(score_answer("123", "12", False, 2), 3)
    empty = _trajectory(score_answer("", "7", True, 1), 1)
    assert [arithmetic_exact_match(t) for t in (right, wrong, short, overlong, empty)] == [1, 0, 0, 0, 0]
    assert [arithmetic_format(t) for t in (right, wrong, short, overlong, empty)] == [1, 1, 1, 0, 0]
    assert [arithmetic_length_penalty(t) for t in (right, wrong, short, overlong, empty)] == [0, 0, -0.5, -0.5, -1]
    with pytest.raises(ValueError, match="Arithmetic"):
        arithmetic_exact_match(_trajectory({"episode": {}}))


def test_prefix_match_by_hand():
    cases = [("14", "14", 1.0), ("13", "14", 0.5), ("1", "14", 0.5), ("41", "14", 0.0), ("145", "14", 1.0), ("", "7", 0.0)]
    for answer_, target, expected in cases:
        trajectory = _trajectory(score_answer(answer_, target, True, 2), max(len(answer_), 1))
        assert arithmetic_prefix_match(trajectory) == expected, (answer_, target)
    assert arithmetic_prefix_match(_trajectory(score_answer("123", "123", True, 3), 4)) == 1.0
    with pytest.raises(ValueError, match="Arithmetic"):
        arithmetic_prefix_match(_trajectory({"episode": {}}))


def test_digit_match_by_hand_sums_to_prefix_match():
    cases = [
        ("14", "14", [0.5, 0.5, 0]),
        ("13", "14", [0.5, 0, 0]),
        ("41", "14", [0, 0, 0]),
        ("105", "105", [1 / 3] * 3 + [0]),
    ]
    for answer_, target, expected in cases:
        trajectory = _trajectory(score_answer(answer_, target, True, 3), len(expected))
        np.testing.assert_allclose(arithmetic_digit_match(trajectory), expected)
        assert arithmetic_digit_match(trajectory).sum() == pytest.approx(arithmetic_prefix_match(trajectory))
    over_long = _trajectory(score_answer("1111", "11", False, 3), 4)  # the fourth digit ended the episode
    np.testing.assert_allclose(arithmetic_digit_match(over_long), [0.5, 0.5, 0, 0])


def test_reward_functions_match_the_shaped_env_reward():
    env = ArithmeticEnv(reward_mode="shaped")
    rng = np.random.default_rng(0)
    for seed in range(50):
        env.reset(seed=seed)
        rewards, infos, terminated = [], [], False
        while not terminated:
            _, reward, terminated, _, info = env.step(int(rng.integers(0, 11)))
            rewards.append(reward)
            infos.append(info)
        trajectory = Trajectory(
            observations=np.zeros((len(infos), 5)),
            actions=np.zeros(len(infos)),
            rewards=np.array(rewards),
            infos=infos,
            terminated=True,
            truncated=False,
        )
        total = sum(f(trajectory) for f in (arithmetic_exact_match, arithmetic_format, arithmetic_length_penalty))
        assert total == pytest.approx(rewards[-1])


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"task": "sub"},
        {"task": "sequence", "reward_mode": "sparse"},
        {"max_operand": 99, "reward_mode": "shaped", "render_mode": "ansi"},
        {"render_mode": "rgb_array"},
    ],
)
def test_gymnasium_env_checker(kwargs):
    check_env(gym.make("sb3_grpo/Arithmetic-v0", **kwargs).unwrapped, skip_render_check=False)


def test_render():
    env = ArithmeticEnv(render_mode="ansi")
    _, info = env.reset(seed=0)
    env.step(1)
    assert env.render() == info["question"] + "=1"
    image = ArithmeticEnv(render_mode="rgb_array")
    image.reset(seed=0)
    frame = image.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3 and frame.max() == 255


def test_exact_match_accuracy_with_an_oracle():
    class Oracle:
        def predict(self, obs, deterministic=True):
            question, written = decode(obs[:3]), decode(obs[3:])
            target = solve(question)
            return (END if written == target else int(target[len(written)])), None

    assert exact_match_accuracy(Oracle(), n_episodes=50) == 1.0


def test_grpo_groups_share_questions_and_train():
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_grpo import GRPO

    env = make_vec_env("sb3_grpo/Arithmetic-v0", n_envs=4, seed=0)
    model = GRPO(
        "MlpPolicy",
        env,
        reward_functions=[arithmetic_exact_match, arithmetic_format],
        group_size=4,
        n_steps=16,
        batch_size=64,
        n_epochs=1,
        seed=0,
        device="cpu",
    )  # verify_group_starts: reset(seed) is reproducible
    model.learn(300)
    assert model.num_timesteps >= 300


def test_registered_names():
    """Needs sb3_grpo.envs.arithmetic_rewards in DEFAULT_PLUGINS and ``import sb3_grpo.envs`` in sb3_grpo/__init__.py."""
    import subprocess
    import sys

    code = (
        "import gymnasium as gym, sb3_grpo\n"
        "gym.make('sb3_grpo/Arithmetic-v0')\n"
        "names = sb3_grpo.available_reward_functions()\n"
        "assert {'arithmetic_exact_match', 'arithmetic_format', 'arithmetic_length_penalty', 'arithmetic_prefix_match'} "
        "<= set(names), names\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pad_operands_aligns_the_place_values_and_keeps_the_questions_plain():
    env = ArithmeticEnv(max_operand=99, pad_operands=True)
    obs, info = env.reset(options={"question": "7+45"})
    assert info["question"] == "7+45" and decode(obs) == "07+45"
    assert decode(ArithmeticEnv(max_operand=99).reset(options={"question": "7+45"})[0]) == "7+45"
    assert env.split_questions("all") == ArithmeticEnv(max_operand=99).split_questions("all")
    _, _, _, _, info = answer(env, "52")
    assert info["correct"] and info["target"] == "52"
    sequence = ArithmeticEnv(task="sequence", pad_operands=True)  # terms up to 9 + 2 * 3 = 15: two digits
    assert decode(sequence.reset(options={"question": "2,4,6"})[0]) == "02,04,06"


def test_reverse_answer_writes_the_least_significant_digit_first():
    env = ArithmeticEnv(max_operand=99, reverse_answer=True)
    env.reset(options={"question": "99+9"})
    _, _, _, _, info = answer(env, "801")
    assert info["correct"] and info["format_ok"] and (info["answer"], info["target"]) == ("801", "801")
    env.reset(options={"question": "99+9"})
    assert not answer(env, "108")[-1]["correct"]  # the plain order is wrong here
    env.reset(options={"question": "5+5"})
    assert answer(env, "01")[-1]["correct"]  # 10, written 0 then 1
    env.reset(options={"question": "5+5"})
    info = answer(env, "010")[-1]
    assert not info["format_ok"] and not info["correct"]  # 010 reversed is 010: a leading zero
    assert score_answer("0", "0", True, 3, reverse_answer=True)["format_ok"]
    assert not score_answer("10", "1", True, 3, reverse_answer=True)["format_ok"]  # the number 01
    trajectory = _trajectory(score_answer("21", "25", True, 3, reverse_answer=True), 3)
    assert arithmetic_prefix_match(trajectory) == 0.5  # credit for the right units digit, written first


def test_aligned_options_in_split_accuracy():
    """split_accuracy builds its envs with the same options: a policy that answers right in the written order."""
    kwargs = dict(max_operand=12, pad_operands=True, reverse_answer=True)

    class Oracle:
        def __init__(self):
            self.env = ArithmeticEnv(**kwargs)

        def predict(self, obs, deterministic=True):
            actions = []
            for row in np.atleast_2d(obs):
                question = decode(row[: self.env.question_length])
                a, b = (int(x) for x in question.split("+"))
                written = decode(row[self.env.question_length :])
                target = str(a + b)[::-1]
                actions.append(int(target[len(written)]) if len(written) < len(target) else END)
            return np.array(actions), None

    assert split_accuracy(Oracle(), "all", **kwargs) == 1.0


@pytest.mark.parametrize("cls", ["GRPO", "OnlineDPO"])
def test_the_env_brings_its_verifiable_rewards_as_the_default_reward_functions(cls):
    """``reward_functions=None`` (the default) scores an env with the reward functions its ``metadata`` declares (the
    question-answer envs: their verifiable rewards; their own step reward is 0, so the episodic return would carry no
    signal), else with the episodic return; given reward functions win."""
    import warnings

    import torch as th
    from stable_baselines3.common.env_util import make_vec_env

    import sb3_grpo

    algorithm = getattr(sb3_grpo, cls)
    declared = list(sb3_grpo.envs.ArithmeticEnv.metadata["reward_functions"])
    env = make_vec_env("sb3_grpo/Arithmetic-v0", n_envs=2, seed=0)
    model = algorithm("MlpPolicy", env, group_size=4, n_steps=16, policy_kwargs=dict(net_arch=[16]), seed=0, device="cpu")
    assert model.reward_functions == declared
    before = [p.detach().clone() for p in model.policy.parameters()]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "no signal" warning
        model.learn(400)
    assert any(not th.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    assert algorithm("MlpPolicy", "CartPole-v1", device="cpu").reward_functions == ["episodic_return"]
    scored_by_env = make_vec_env("sb3_grpo/Arithmetic-v0", n_envs=2, env_kwargs=dict(reward_mode="sparse"))
    assert algorithm("MlpPolicy", scored_by_env, device="cpu").reward_functions == ["episodic_return"]
    given = algorithm("MlpPolicy", env, reward_functions=["arithmetic_format"], device="cpu")
    assert given.reward_functions == ["arithmetic_format"]
