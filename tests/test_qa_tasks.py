"""benchmarks.qa_tasks and benchmarks.reinforce_cartpole: one tiny run each writes a complete CSV row."""

import csv
import json

import pytest

from benchmarks import qa_tasks


@pytest.mark.parametrize(
    ("algo", "task", "extra"),
    [
        ("grpo", "add", ["--set", "extractor=gru", "--set", "extractor.embed_dim=8"]),
        ("ppo", "sequence", []),
        ("grpo", "heldout", ["--set", "env.pad_operands=true", "--set", "env.reverse_answer=true"]),
        ("grpo", "heldout", ["--config", "heldout", "--budget", "1200"]),  # the later --config wins
    ],
)
def test_one_run_appends_a_row(algo, task, extra, tmp_path, capsys):
    out = tmp_path / "qa.csv"
    run = ["--algo", algo, "--task", task, "--config", "example", "--seeds", "0", "--budget", "600", "--eval-every", "300"]
    qa_tasks.main([*run, "--out", str(out), *extra])
    (row,) = list(csv.DictReader(out.open()))
    assert (row["algo"], row["task"], row["seed"]) == (algo, task, "0")
    assert row["config"] == (extra[extra.index("--config") + 1] if "--config" in extra else "example")
    assert 0.0 <= float(row["accuracy"]) <= 1.0 and 0.0 <= float(row["train_accuracy"]) <= 1.0
    curve = json.loads(row["curve"])
    assert len(curve) >= 2 and curve[-1][1] == float(row["accuracy"])
    assert f"seed 0: accuracy {float(row['accuracy']):.3f}" in capsys.readouterr().out


def test_settings():
    assert qa_tasks.parse_set(["a=1", "b=[2, 3]", "c=relu"]) == {"a": 1, "b": [2, 3], "c": "relu"}
    schedule = qa_tasks.learning_rate("lin_1e-3")
    assert schedule(1.0) == pytest.approx(1e-3) and schedule(0.5) == pytest.approx(5e-4)
    kwargs = qa_tasks.policy_kwargs({"extractor": "transformer", "extractor.n_layers": 2, "activation": "relu"})
    assert kwargs["features_extractor_kwargs"] == {"sequence_model": "transformer", "n_layers": 2}
    settings = {"env.pad_operands": True, "n_envs": 4}
    assert qa_tasks.env_settings(settings) == {"pad_operands": True} and settings == {"n_envs": 4}
    with pytest.raises(SystemExit, match="key=value"):
        qa_tasks.parse_set(["novalue"])
    with pytest.raises(SystemExit, match="extractor"):
        qa_tasks.policy_kwargs({"extractor.embed_dim": 8})


def test_reinforce_cartpole_row(tmp_path):
    from benchmarks import reinforce_cartpole

    out = tmp_path / "rf.csv"
    reinforce_cartpole.main(["--seeds", "0", "--budget", "1024", "--eval-every", "512", "--out", str(out)])
    (row,) = list(csv.DictReader(out.open()))
    assert row["algo"] == "reinforce" and float(row["final_return"]) > 0
