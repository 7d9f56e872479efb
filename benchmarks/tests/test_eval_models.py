"""The harness saves the model at each evaluation when asked, and eval_models evaluates the saved models again."""

import pytest

from benchmarks import eval_models


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import benchmarks.harness as harness

    out = tmp_path_factory.mktemp("work")
    entry = {"n_envs": 2, "n_steps": 64, "group_size": 2, "normalize": "{'norm_obs': True, 'norm_reward': False}"}
    original = harness.load_hyperparams
    harness.load_hyperparams = lambda algo, env_id: dict(entry)
    try:
        harness.run_cell("grpo", "Pendulum-v1", 0, 512, str(out), eval_freq=256, n_eval_episodes=1, save_models=True)
    finally:
        harness.load_hyperparams = original
    return out / "grpo__Pendulum-v1__s0__512.models", out / "grpo__Pendulum-v1__s0__512.csv"


def test_the_harness_saves_the_model_it_evaluates(models):
    directory, curve = models
    evaluated = [int(line.split(",")[0]) for line in curve.read_text().splitlines()[1:]]
    assert sorted(int(p.stem) for p in directory.glob("*.zip")) == evaluated and len(evaluated) >= 3
    assert sorted(int(p.name.split(".")[0]) for p in directory.glob("*.vecnormalize.pkl")) == evaluated


def test_eval_models_compares_each_model_with_the_one_before(models):
    directory, _ = models
    steps = sorted(int(p.stem) for p in directory.glob("*.zip"))
    first, last = steps[0], steps[-1]
    rows = eval_models.evaluate(directory, [first, first, last], n_episodes=2)
    assert rows[0]["kl"] is None and rows[1]["kl"] == 0.0 and rows[1]["mean_shift"] == 0.0  # a model against itself
    assert rows[2]["kl"] > 0 and rows[2]["mean_shift"] > 0
    assert rows[0]["deterministic"] == rows[1]["deterministic"]  # the same start states, no noise
    assert rows[0]["noisy"] == rows[1]["noisy"]  # the same start states and action noise
    assert rows[0]["noisy"] != rows[0]["deterministic"]
    assert rows[0]["deterministic"][2] == 200  # Pendulum-v1's episodes
    table = eval_models.markdown(rows).splitlines()
    assert len(table) == 5 and table[2].endswith("| - | - |")


def test_eval_models_says_what_it_cannot_find(models, tmp_path):
    directory, _ = models
    with pytest.raises(FileNotFoundError, match="saved: \\[256"):
        eval_models.evaluate(directory, [7], n_episodes=1)
    with pytest.raises(ValueError, match="not a cell's models directory"):
        eval_models.evaluate(tmp_path, [7], n_episodes=1)


def test_the_command_line_prints_the_table_or_says_what_is_missing(models, capsys):
    directory, _ = models
    eval_models.main([str(directory), "--steps", "256", "--episodes", "1"])
    assert capsys.readouterr().out.splitlines()[2].startswith("| 256 | ")
    with pytest.raises(SystemExit):
        eval_models.main([str(directory), "--steps", "7"])
    assert "no model saved at 7 steps" in capsys.readouterr().err
