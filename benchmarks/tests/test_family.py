"""benchmarks.family: the same outcome signal for every algorithm, the table from stored rows."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from torch import nn

import sb3_grpo  # noqa: F401  (registers the envs)
from benchmarks import family, qa_tasks
from sb3_grpo.common.reward_scoring import Trajectory
from sb3_grpo.envs.arithmetic_rewards import (
    arithmetic_exact_match,
    arithmetic_format,
    arithmetic_length_penalty,
    arithmetic_prefix_match,
)

GRPO_HELDOUT = qa_tasks.CONFIGS["grpo"]["heldout"]


def answer(env: gym.Env, digits: str) -> list[float]:
    """Write ``digits`` then end-of-answer; the rewards of every step."""
    rewards = []
    for token in [int(d) for d in digits] + [10]:
        _, reward, terminated, truncated, _info = env.step(token)
        rewards.append(reward)
        if terminated or truncated:
            break
    return rewards


@pytest.mark.parametrize("digits", ["12", "13", "2", "1"])
def test_env_reward_is_the_sum_of_the_reward_functions_on_the_last_step(digits):
    env = family.RewardFunctionsAsEnvReward(gym.make("sb3_grpo/Arithmetic-v0"), family.REWARD_FUNCTIONS)
    env.reset(seed=0, options={"question": "5+7"})
    rewards = answer(env, digits)
    info = {"answer": digits, "target": "12", "correct": digits == "12", "format_ok": True}
    trajectory = Trajectory(None, np.zeros(1), np.zeros(1), [info], True, False)
    expected = sum(
        f(trajectory) for f in (arithmetic_exact_match, arithmetic_format, arithmetic_length_penalty, arithmetic_prefix_match)
    )
    assert rewards[:-1] == [0.0] * (len(rewards) - 1)
    assert rewards[-1] == pytest.approx(expected)
    assert rewards[-1] == pytest.approx({"12": 3.0, "13": 1.5, "2": 0.5, "1": 1.0}[digits])
    # a second answer starts from an empty record
    env.reset(seed=1, options={"question": "5+7"})
    assert answer(env, "12")[-1] == pytest.approx(3.0)


@pytest.mark.parametrize("algo", family.ALGOS)
def test_every_algorithm_builds_with_the_shared_network(algo):
    model = family.build_qa(algo, "add", seed=0)
    assert model.n_envs == 16
    linear = [m for m in model.policy.modules() if isinstance(m, nn.Linear)]
    assert any(m.in_features == 256 and m.out_features == 256 for m in linear)
    assert any(isinstance(m, nn.ReLU) for m in model.policy.modules())
    assert not any(isinstance(m, nn.Tanh) for m in model.policy.modules())


def test_report_table_from_rows():
    rows = [
        dict(algo="grpo", task="add", seed=s, accuracy=a, steps_to_threshold=st, curve=json.dumps([[0, 0.0], [200_000, a]]))
        for s, a, st in [(0, 1.0, 150_000), (1, 0.98, "")]
    ]
    text = family.report_table(rows, {}, seeds=[0, 1])
    grpo = next(line for line in text.splitlines() if line.startswith("| GRPO"))
    assert "0.99 ± 0.01 (min 0.98)" in grpo
    assert "150k (1/2)" in grpo
    reinforce = next(line for line in text.splitlines() if line.startswith("| REINFORCE"))
    assert reinforce.count("| -") == 6


@pytest.mark.parametrize(("digits", "expected"), [("25", 3.0), ("24", 1.5), ("2", 1.0), ("52", 1.0), ("253", 1.5)])
def test_heldout_env_reward_sums_the_per_digit_credit_into_the_last_step(digits, expected):
    """``arithmetic_digit_match`` pays per step: the env reward gets its sum on the last step, with the rest."""
    env = family.RewardFunctionsAsEnvReward(
        gym.make("sb3_grpo/ArithmeticHeldOut-v0", pad_operands=True, reverse_answer=True), GRPO_HELDOUT["reward_functions"]
    )
    env.reset(seed=0, options={"question": "7+45"})  # 52, written units first: "25"
    rewards = answer(env, digits)
    assert rewards[:-1] == [0.0] * (len(rewards) - 1)
    assert rewards[-1] == pytest.approx(expected)


@pytest.mark.parametrize("algo", family.ALGOS)
def test_heldout_configs_share_grpos_heldout_settings(algo):
    config = family.CONFIGS["heldout"][algo]
    shared = ("n_envs", "net_arch", "activation", "extractor", "learning_rate", "ent_coef", "reward_functions")
    for key in (*shared, "env.pad_operands", "env.reverse_answer"):
        assert config[key] == GRPO_HELDOUT[key], key
    assert (config["learning_rate"], config["ent_coef"], config["n_steps"]) == (1e-3, 0.05, 32)
    assert config["env.pad_operands"] is True and config["env.reverse_answer"] is True
    assert "arithmetic_digit_match" in config["reward_functions"]
    if algo == "grpo":
        assert config == GRPO_HELDOUT
    else:
        # what is the algorithm's own is what it has on the other tasks
        add = family.CONFIGS["add"][algo]
        assert {k: v for k, v in config.items() if k not in family.HELDOUT_SHARED} == {
            k: v for k, v in add.items() if k not in family.SHARED
        }
    if algo in ("ppo", "adaptive_kl_ppo"):
        assert (config["batch_size"], config["n_epochs"], config["gamma"]) == (256, 10, 1.0)
    if algo == "reinforce":
        assert config["gamma"] == 1.0
    if algo == "online_dpo":
        dpo = dict(loss_type="ipo", beta=0.5, pairs="all", ref_update_interval=1, group_size=16, batch_size=64, n_epochs=4)
        assert {k: config[k] for k in dpo} == dpo


@pytest.mark.parametrize("algo", family.ALGOS)
def test_heldout_models_train_on_digit_aligned_questions(algo):
    model = family.build_qa(algo, "heldout", seed=0)
    env = model.get_env().envs[0]
    assert env.spec.id == "sb3_grpo/ArithmeticHeldOut-v0"
    assert env.unwrapped.pad_operands and env.unwrapped.reverse_answer and env.unwrapped.split == "train"
    assert model.lr_schedule(1.0) == pytest.approx(1e-3) and model.lr_schedule(0.0) == pytest.approx(1e-3)
    assert model.ent_coef == pytest.approx(0.05)
    linear = [m for m in model.policy.modules() if isinstance(m, nn.Linear)]
    assert any(m.in_features == 256 and m.out_features == 256 for m in linear)
    if algo in family.GROUP_ALGOS:
        assert not isinstance(env, family.RewardFunctionsAsEnvReward)
    else:
        wrapper = env
        while not isinstance(wrapper, family.RewardFunctionsAsEnvReward):
            wrapper = wrapper.env
        assert [f.__name__ for f in wrapper.functions] == GRPO_HELDOUT["reward_functions"]


def fake_run(calls):
    def run_qa(algo, task, seed, budget=None, eval_every=None):
        calls.append((algo, task, seed, budget, eval_every))
        row = dict(algo=algo, task=task, seed=seed, budget=budget, steps=budget, accuracy=0.5)
        if task == "heldout":
            row["train_accuracy"] = 0.75
        return dict(row, threshold=0.9, steps_to_threshold="", seconds=1.0, date="", commit="", curve="[[0, 0.5]]")

    return run_qa


def test_tasks_algos_and_budgets_select_the_runs(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(family, "run_qa", fake_run(calls))
    common = ["--seeds", "0", "--no-cartpole", "--results", str(tmp_path)]
    family.main(["--algos", "grpo", *common])  # default: the two tasks of the first table
    assert calls == [("grpo", "add", 0, 200_000, 10_000), ("grpo", "sequence", 0, 200_000, 10_000)]
    calls.clear()
    family.main(["--tasks", "heldout", *common])
    assert calls == [(algo, "heldout", 0, 2_000_000, 100_000) for algo in family.ALGOS]
    assert len(family.read_qa(tmp_path / "family_heldout.csv")) == 5
    assert [r["task"] for r in family.read_qa(tmp_path / "family.csv")] == ["add", "sequence"]
    calls.clear()
    family.main(["--tasks", "add", "heldout", "--algos", "grpo", *common])  # nothing missing
    assert calls == []
    family.main(["--tasks", "heldout", "--algos", "ppo", "--budget", "512", *common])  # another budget is another run
    assert calls == [("ppo", "heldout", 0, 512, 100_000)]


def test_a_run_of_one_seed_reports_the_pages_seeds(tmp_path, monkeypatch):
    """Running one missing seed rebuilds the page over its five seeds, not over that seed alone; a trial elsewhere
    (``--results``) prints the seeds it ran."""
    monkeypatch.setattr(family, "run_qa", fake_run([]))
    reported = []
    monkeypatch.setattr(family, "write_report", lambda seeds, **kwargs: reported.append((seeds, kwargs["page"])) or "")
    monkeypatch.setattr(family.table, "RESULTS", tmp_path)  # the stored rows
    family.main(["--tasks", "heldout", "--algos", "ppo", "--seeds", "3", "--no-cartpole"])
    assert reported == [([0, 1, 2, 3, 4], family.PAGE)]
    family.main(["--report", "--seeds", "3", "--results", str(tmp_path / "trial")])
    assert reported[-1] == ([3], None)


def test_report_heldout_table_from_rows(tmp_path):
    page = tmp_path / "family.md"
    first = f"# page\n\n{family.MARKERS[0]}\nold\n{family.MARKERS[1]}\n\ntext\n\n"
    after = "\n\nrest\n"
    page.write_text(first + f"{family.HELDOUT_MARKERS[0]}\nold\n{family.HELDOUT_MARKERS[1]}" + after)
    text = family.write_report([0, 1], page=page, with_plot=False, results=tmp_path)
    assert family.HELDOUT_COMMAND in text and "No `heldout` rows" in text
    assert family.HELDOUT_COMMAND in page.read_text()
    before = page.read_text().split(family.HELDOUT_MARKERS[0])[0]  # the first table, rebuilt from no rows
    assert before.startswith(f"# page\n\n{family.MARKERS[0]}\n| algorithm |") and before.endswith("\n\ntext\n\n")

    for seed, accuracy, steps in [(0, 0.93, 1_500_160), (1, 0.91, ""), (2, 0.10, "")]:  # seed 2 is not asked for
        row = dict(algo="grpo", task="heldout", seed=seed, budget=2_000_000, steps=2_000_128, accuracy=accuracy)
        row.update(train_accuracy=accuracy + 0.02, threshold=0.9, steps_to_threshold=steps, curve="[]")
        qa_tasks.append_row(tmp_path / "family_heldout.csv", row)
    text = family.write_report([0, 1], page=page, with_plot=False, results=tmp_path)
    content = page.read_text()
    assert content.startswith(before) and content.endswith(after)
    block = content[len(before) : -len(after)].splitlines()
    assert block[0] == family.HELDOUT_MARKERS[0] and block[-1] == family.HELDOUT_MARKERS[1]
    assert block[1] == "| algorithm | held-out accuracy at 2M | training-split accuracy at 2M | steps to 0.9 |"
    assert "| GRPO | 0.920 ± 0.010 (min 0.910) | 0.940 ± 0.010 (min 0.930) | 1500k (1/2) |" in block
    assert "| PPO (SB3) | - | - | - |" in block
    assert "\n".join(block[1:-1]) in text


def test_grpo_heldout_run_is_the_measured_qa_tasks_run():
    """GRPO's ``heldout`` row is the run docs/guide/question_answer.md measured with benchmarks.qa_tasks."""
    settings = dict(GRPO_HELDOUT)
    env_overrides = qa_tasks.env_settings(settings)
    models = [qa_tasks.build("grpo", "heldout", settings, 0, env_overrides), family.build_qa("grpo", "heldout", seed=0)]
    for model in models:
        model.learn(512)
    for ours, measured in zip(models[1].policy.parameters(), models[0].policy.parameters(), strict=True):
        assert th.equal(ours, measured)
