"""The benchmark harness reads the hyperparameters it says it reads, and adds each finished cell to the results table."""

import inspect
import json
from pathlib import Path

import pytest
import torch as th
import yaml

from benchmarks.harness import cell_name, load_hyperparams, parse_cell_name, versions

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("algo", ["grpo", "exact_trpo", "adaptive_kl_ppo"])
def test_default_variant_reads_the_zoo_default_entry_on_any_env(algo):
    table = yaml.safe_load((ROOT / "zoo_configs" / f"{algo}.yml").read_text())
    # CartPole-v1 has its own entry; "<algo>:default" must ignore it and score the `default` entry instead.
    assert table["CartPole-v1"] != table["default"]
    assert load_hyperparams(f"{algo}:default", "CartPole-v1") == table["default"]
    assert load_hyperparams(algo, "CartPole-v1") == table["CartPole-v1"]
    assert "CartPole-v0" not in table
    assert load_hyperparams(algo, "CartPole-v0") == table["default"]  # no entry: rl-zoo's fallback
    assert cell_name(f"{algo}:default", "CartPole-v1", 0, 1000) == f"{algo}-default__CartPole-v1__s0__1000"


def test_a_cell_name_parses_back_to_its_cell():
    for cell in [("grpo:hop_narrow_kl005", "Hopper-v5", 3, 1_000_000), ("ppo", "sb3_grpo/Arithmetic-v0", 0, 200_000)]:
        assert parse_cell_name(cell_name(*cell)) == cell
    for name in ["grpo__Hopper-v5__s0", "grpo__Hopper-v5__0__1000", "grpo__Hopper-v5__s0__1k"]:
        with pytest.raises(ValueError, match="not a cell's name"):
            parse_cell_name(name)


def test_v5_envs_fall_back_to_the_v4_entry_then_default():
    assert load_hyperparams("ppo", "Hopper-v5") == load_hyperparams("ppo", "Hopper-v4")


def _sweeps(monkeypatch, tmp_path, files):
    """Sweep files in a stand-in repository root (zoo files are read from the real one's copy of grpo.yml)."""
    from benchmarks import harness

    (tmp_path / "benchmarks" / "sweeps").mkdir(parents=True, exist_ok=True)
    (tmp_path / "zoo_configs").mkdir(exist_ok=True)
    (tmp_path / "zoo_configs" / "grpo.yml").write_text((ROOT / "zoo_configs" / "grpo.yml").read_text())
    for name, text in files.items():
        (tmp_path / "benchmarks" / "sweeps" / f"{name}.yml").write_text(text)
    monkeypatch.setattr(harness, "ROOT", tmp_path)


def test_a_sweep_with_a_base_is_the_base_with_its_changes(monkeypatch, tmp_path):
    first = """
Hopper-v5:
  n_envs: 8
  gamma: 0.99
  reward_gammas: [0.97]
  policy_kwargs: dict(log_std_init=-2)
  advantage_kwargs: {state_baseline: true}
  switch:
    at: 500000
    set:
      reward_gammas: [0.97, 0.999]
      log_std_max: [-0.54, -3.0]
"""
    second = """
Hopper-v5:
  base: grpo:a
  gamma: 0.995
  advantage_kwargs: {lam: 0.95}
  switch:
    set:
      log_std_max: [1.0, -3.0]
"""
    third = "Hopper-v5:\n  base: grpo:b\n  reward_gammas: [0.9]\n"
    _sweeps(monkeypatch, tmp_path, {"grpo_a": first, "grpo_b": second, "grpo_c": third})
    assert load_hyperparams("grpo:b", "Hopper-v5") == {
        "n_envs": 8,
        "gamma": 0.995,  # replaced
        "reward_gammas": [0.97],
        "policy_kwargs": "dict(log_std_init=-2)",
        "advantage_kwargs": {"state_baseline": True, "lam": 0.95},  # mappings merge key by key
        "switch": {"at": 500000, "set": {"reward_gammas": [0.97, 0.999], "log_std_max": [1.0, -3.0]}},
    }
    third_resolved = load_hyperparams("grpo:c", "Hopper-v5")  # a base may have a base: resolved in turn
    assert third_resolved["reward_gammas"] == [0.9]  # a list replaces the base's whole
    assert third_resolved["gamma"] == 0.995 and third_resolved["switch"]["set"]["log_std_max"] == [1.0, -3.0]
    assert load_hyperparams("grpo:a", "Hopper-v5") == yaml.safe_load(first)["Hopper-v5"]  # the base is unchanged
    fourth = "Hopper-v5:\n  base: grpo:b\n  drop: [reward_gammas, switch]\n  gamma: 0.9\n"
    _sweeps(monkeypatch, tmp_path, {"grpo_e": fourth})
    assert load_hyperparams("grpo:e", "Hopper-v5") == {  # dropped before the changes merge in
        "n_envs": 8,
        "gamma": 0.9,
        "policy_kwargs": "dict(log_std_init=-2)",
        "advantage_kwargs": {"state_baseline": True, "lam": 0.95},
    }
    # the base's entry for the same env, with rl-zoo's fallback: the zoo entry's `default` on an env it lacks
    _sweeps(monkeypatch, tmp_path, {"grpo_d": "MyEnv-v0:\n  base: grpo\n  n_envs: 3\n"})
    zoo = yaml.safe_load((ROOT / "zoo_configs" / "grpo.yml").read_text())
    assert load_hyperparams("grpo:d", "MyEnv-v0") == {**zoo["default"], "n_envs": 3}


@pytest.mark.parametrize(
    ("files", "match"),
    [
        ({"grpo_a": "Hopper-v5:\n  base: grpo:b\n", "grpo_b": "Hopper-v5:\n  base: grpo:a\n"}, "leads back to itself"),
        ({"grpo_a": "Hopper-v5:\n  base: grpo:a\n"}, "leads back to itself"),
        ({"grpo_a": "Hopper-v5:\n  base: exact_trpo\n"}, "same algorithm, 'grpo'"),
        ({"grpo_a": "Hopper-v5:\n  base: [grpo]\n"}, "same algorithm"),
        (
            {"grpo_a": "Hopper-v5:\n  base: grpo:b\n  drop: [gamma, n_epochs]\n", "grpo_b": "Hopper-v5: {gamma: 0.9}\n"},
            "drop names n_epochs, which grpo:b's entry for Hopper-v5 does not have \\(it has gamma\\)",
        ),
        ({"grpo_a": "Hopper-v5:\n  base: grpo:b\n  drop: gamma\n", "grpo_b": "Hopper-v5: {gamma: 0.9}\n"}, "must list"),
        ({"grpo_a": "Hopper-v5:\n  drop: [gamma]\n"}, "name one with 'base'"),
    ],
)
def test_a_wrong_base_is_refused(monkeypatch, tmp_path, files, match):
    _sweeps(monkeypatch, tmp_path, files)
    with pytest.raises(ValueError, match=match):
        load_hyperparams("grpo:a", "Hopper-v5")


def test_a_base_the_env_lacks_is_refused_and_zoo_files_take_none(monkeypatch, tmp_path):
    _sweeps(monkeypatch, tmp_path, {"grpo_a": "Hopper-v5:\n  base: grpo:b\n", "grpo_b": "Walker2d-v5: {}\n"})
    with pytest.raises(KeyError, match="No hyperparameters for grpo:b on Hopper-v5"):
        load_hyperparams("grpo:a", "Hopper-v5")
    (tmp_path / "zoo_configs" / "grpo.yml").write_text("Hopper-v5:\n  base: grpo:b\n")
    with pytest.raises(ValueError, match="'base' is a key of sweep files only"):
        load_hyperparams("grpo", "Hopper-v5")


def test_sweep_variant_reads_its_sweep_file():
    table = yaml.safe_load((ROOT / "benchmarks" / "sweeps" / "grpo_hop_p.yml").read_text())
    assert load_hyperparams("grpo:hop_p", "Hopper-v5") == table["Hopper-v5"]
    with pytest.raises(KeyError, match="No hyperparameters"):
        load_hyperparams("grpo:hop_p", "CartPole-v1")


def test_env_kwargs_reach_only_the_training_envs(monkeypatch):
    """An entry's ``env_kwargs`` (e.g. a longer training time limit) never changes the evaluation env."""
    import benchmarks.harness as harness

    entry = {"n_envs": 2, "n_steps": 64, "group_size": 2, "env_kwargs": {"max_episode_steps": 700}}
    monkeypatch.setattr(harness, "load_hyperparams", lambda algo, env_id: dict(entry))
    model, eval_env, used = harness.build("grpo", "CartPole-v1", seed=0)
    assert [env.spec.max_episode_steps for env in model.get_env().envs] == [700, 700]
    assert eval_env.envs[0].spec.max_episode_steps == 500  # CartPole-v1's own registration
    assert used == entry  # the entry as written, recorded with the cell


def test_cells_record_the_numerical_libraries_and_the_cpu():
    """Cells are not bit-reproducible across machines: what they ran on goes into their summary."""
    import numpy

    recorded = versions()
    assert recorded["numpy"] == numpy.__version__
    assert {"torch", "gymnasium", "stable_baselines3", "sb3_contrib", "machine", "cpu"} <= set(recorded)
    assert recorded["cpu"] and all(isinstance(value, str) for value in recorded.values())
    # the kernels chosen for this CPU: numpy's BLAS libraries' (OpenBLAS in numpy's wheels) and torch's vector width
    from threadpoolctl import threadpool_info

    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    assert recorded["kernels"].endswith(f"torch {th.backends.cpu.get_cpu_capability()}")
    assert recorded["kernels"].count(" thread") == len(blas)


def test_a_finished_cell_goes_to_the_table_once(tmp_path, capsys):
    from benchmarks import harness, table

    work, results = tmp_path / "work", tmp_path / "results"
    summary = harness.run_cell("grpo", "CartPole-v1", 0, 512, str(work), eval_freq=256, n_eval_episodes=1)
    assert (work / "grpo__CartPole-v1__s0__512.json").exists()
    assert summary["hyperparams"] == {k: v for k, v in load_hyperparams("grpo", "CartPole-v1").items() if k != "n_timesteps"}
    assert summary["date"] and "commit" in summary
    # The harness's command line adds what the working directory finished and skips what the table holds.
    argv = ["--algos", "grpo", "--envs", "CartPole-v1", "--seeds", "0", "--budget", "512", "--out", str(work)]
    argv += ["--results", str(results)]
    harness.main(argv)
    assert "1 already finished, 0 to run" in capsys.readouterr().out
    (row,) = table.read_cells(results / "cells.csv.gz")
    assert (row["algo"], row["variant"], row["env"], row["seed"], row["budget"]) == ("grpo", "", "CartPole-v1", 0, 512)
    assert json.loads(row["defaults"]) == summary["defaults"] and harness.changed_defaults(row) == {}
    assert row["final_eval"] == summary["final_eval"] and row["cpu"] == summary["versions"]["cpu"]
    # a cell runs numpy's BLAS on one thread, as torch, and records it
    *blas, torch_kernels = row["kernels"].split("; ")
    assert row["kernels"] == summary["versions"]["kernels"] and torch_kernels.startswith("torch ")
    assert blas and all(part.endswith(", 1 thread") for part in blas)  # numpy's wheels bring OpenBLAS
    curve = table.read_curves(results / "curves.csv.gz")
    assert [c["timesteps"] for c in curve] == [r for r in sorted({c["timesteps"] for c in curve})] and len(curve) >= 2
    (work / "grpo__CartPole-v1__s0__512.json").unlink()  # gone from the working directory, still in the table
    harness.main(argv)
    assert "1 already finished, 0 to run" in capsys.readouterr().out
    assert len(table.read_cells(results / "cells.csv.gz")) == 1


def test_a_switch_loads_the_model_with_new_arguments_and_trains_on(tmp_path, monkeypatch):
    """``switch: {at, set}`` trains to ``at``, reloads with ``set`` and trains on to the budget: the evaluations keep
    their steps and the schedules their progress."""
    import benchmarks.harness as harness

    entry = {"n_envs": 2, "n_steps": 64, "group_size": 2, "learning_rate": "lin_1e-3"}
    switch = {"at": 256, "set": {"branch_every": 8, "branch_common_noise": True}}
    monkeypatch.setattr(harness, "load_hyperparams", lambda algo, env_id: dict(entry, switch=switch))
    seen = []
    original = harness.switch_model

    def recording(model, *args):
        loaded = original(model, *args)
        seen.append((model.num_timesteps, loaded.num_timesteps, model.branch_every, loaded.branch_every))
        assert loaded.branch_common_noise and not model.branch_common_noise
        trained.append(th.nn.utils.parameters_to_vector(loaded.policy.parameters()).detach().clone())
        return loaded

    monkeypatch.setattr(harness, "switch_model", recording)
    trained: list = []
    evaluated: list = []
    evaluate_model = harness.evaluate_model

    def recording_evaluation(model, *args):
        evaluated.append(model)
        return evaluate_model(model, *args)

    monkeypatch.setattr(harness, "evaluate_model", recording_evaluation)
    summary = harness.run_cell("grpo", "CartPole-v1", 0, 640, str(tmp_path), eval_freq=128, n_eval_episodes=1)
    ((before, after, every_before, every_after),) = seen
    # the loaded model itself trains on after the switch (the update timer saved with it once trained a copy)
    after_switch = th.nn.utils.parameters_to_vector(evaluated[-1].policy.parameters()).detach()
    assert evaluated[-1].num_timesteps >= 640 and not th.equal(after_switch, trained[0])
    assert before == after >= 256 and (every_before, every_after) == (None, 8)
    curve = (tmp_path / "grpo__CartPole-v1__s0__640.csv").read_text().splitlines()[1:]
    steps = [int(line.split(",")[0]) for line in curve]
    assert steps == sorted(steps) and steps[-1] >= 640 and sum(s < before for s in steps) >= 1
    assert summary["hyperparams"]["switch"] == switch
    assert not list(tmp_path.glob("*.zip"))  # the saved model is removed once loaded
    with pytest.raises(ValueError, match="switch must be"):
        harness.switch_model(None, {"at": 640}, 640, None, tmp_path / "x.zip")
    with pytest.raises(ValueError, match="switch must be"):
        harness.switch_model(None, {"at": 256, "schedules": "total"}, 640, None, tmp_path / "x.zip")


@pytest.mark.parametrize("schedules", ["at", "budget"])
def test_a_switch_runs_the_first_schedules_over_at_or_the_budget(tmp_path, schedules):
    """With ``schedules: at`` the first ``learn`` runs its schedules out by ``at`` steps; with ``schedules: budget``
    it stops at ``at`` steps with the schedules where a single run over the budget has them."""
    import benchmarks.harness as harness
    from sb3_grpo import GRPO

    model = GRPO("MlpPolicy", "CartPole-v1", n_steps=64, group_size=2, learning_rate=lambda p: p, seed=0)
    switch = {"at": 256, "set": {}, "schedules": schedules}
    loaded = harness.switch_model(model, switch, 1024, harness.every_n_steps(10_000, lambda: None), tmp_path / "m.zip")
    assert 256 <= model.num_timesteps == loaded.num_timesteps < 1024
    remaining = model._current_progress_remaining
    if schedules == "at":
        assert model._total_timesteps == 256 and remaining <= 0
    else:
        assert model._total_timesteps == 1024 and remaining > 0.5


def test_every_n_steps_counts_from_the_steps_a_loaded_model_has(tmp_path):
    """A callback made for a model loaded mid-run is called once at each multiple of its frequency above the model's
    steps, not at every step until it catches up."""
    import benchmarks.harness as harness
    from sb3_grpo import GRPO

    model = GRPO("MlpPolicy", "CartPole-v1", n_steps=64, group_size=2, seed=0).learn(512)
    model.save(tmp_path / "m.zip")
    loaded = GRPO.load(tmp_path / "m.zip", env=model.get_env())
    start = loaded.num_timesteps
    calls: list[int] = []
    callback = harness.every_n_steps(200, lambda: calls.append(loaded.num_timesteps))
    loaded.learn(600, callback=callback, reset_num_timesteps=False)
    end = loaded.num_timesteps
    assert start >= 512 and end >= start + 600
    assert [step // 200 for step in calls] == list(range(start // 200 + 1, end // 200 + 1))


def test_cells_record_the_constructor_defaults_their_entry_leaves_out(tmp_path):
    """A cell records the defaults it ran with, so that a default changed later shows against its rows."""
    from benchmarks import harness
    from sb3_grpo import GRPO

    entry = {k: v for k, v in load_hyperparams("grpo", "CartPole-v1").items() if k != "n_timesteps"}
    recorded = harness.constructor_defaults(GRPO, entry)
    parameters = inspect.signature(GRPO.__init__).parameters
    assert set(recorded) == {
        name
        for name, p in parameters.items()
        if p.default is not inspect.Parameter.empty and name not in entry and name not in harness.NOT_HYPERPARAMETERS
    }
    assert "seed" not in recorded and "advantage_estimator" not in recorded  # the entry names its estimator
    assert recorded["max_grad_norm"] == parameters["max_grad_norm"].default
    json.dumps(recorded)  # every default is stored as JSON (a class or a callable by its repr)

    # A default that differs from the one recorded is reported with both values.
    row = {"algo": "grpo", "hyperparams": json.dumps(entry), "defaults": json.dumps({**recorded, "max_grad_norm": 0.1})}
    assert harness.changed_defaults(row) == {"max_grad_norm": (0.1, parameters["max_grad_norm"].default)}
    row["defaults"] = json.dumps({k: v for k, v in recorded.items() if k != "max_grad_norm"})
    assert harness.changed_defaults(row) == {"max_grad_norm": (None, parameters["max_grad_norm"].default)}


@pytest.mark.parametrize("left_out", [("defaults", "kernels"), ("kernels",)])
def test_a_table_written_before_a_later_column_still_reads(tmp_path, left_out):
    """Nothing a user saved is lost: a results table without the later ``defaults`` or ``kernels`` columns reads,
    with them empty; a table with other columns missing, or in another order, is refused."""
    from benchmarks import table

    assert set(left_out) <= set(table.ADDED_COLUMNS)
    old_columns = tuple(c for c in table.CELL_COLUMNS if c not in left_out)
    row = {c: None for c in table.CELL_COLUMNS} | {"algo": "ppo", "variant": "", "env": "E", "seed": 0, "budget": 8}
    table.write(tmp_path / "cells.csv.gz", old_columns, [row | {"defaults": "{}"}])
    (read,) = table.read_cells(tmp_path / "cells.csv.gz")
    assert read["kernels"] == "" and read["algo"] == "ppo"
    assert read["defaults"] == ("" if "defaults" in left_out else "{}")
    for wrong in (("algo",), (*old_columns[1:], old_columns[0])):
        table.write(tmp_path / "cells.csv.gz", wrong, [row])
        with pytest.raises(ValueError, match="are not the expected"):
            table.read_cells(tmp_path / "cells.csv.gz")


def test_a_cell_records_the_commit_it_started_on(tmp_path, monkeypatch):
    """Commits can land while a cell trains: the cell records the one it started on."""
    from benchmarks import harness

    commits = iter(["started", "later", "later"])
    monkeypatch.setattr(harness, "commit", lambda: next(commits))
    summary = harness.run_cell("grpo", "CartPole-v1", 0, 256, str(tmp_path), eval_freq=256, n_eval_episodes=1)
    assert summary["commit"] == "started"


def test_thresholds_are_gymnasiums_where_it_sets_one_but_on_locomotion():
    import gymnasium as gym

    from benchmarks.harness import THRESHOLDS

    own = {"HalfCheetah-v5": 1500.0, "Hopper-v5": 1000.0, "Walker2d-v5": 1000.0, "Pendulum-v1": -200.0}
    for env, threshold in THRESHOLDS.items():
        assert threshold == own.get(env, gym.spec(env).reward_threshold), env


def test_a_zoo_entry_switching_with_its_callback_runs_as_that_switch(tmp_path, monkeypatch):
    """An entry whose rl-zoo ``callback`` is one ``sb3_grpo.SwitchArguments`` runs as the harness's ``switch`` with
    ``schedules: budget`` (recorded in that form, flattened as the entry), and trains to the parameters that the
    callback gives a user's single ``learn`` call."""
    import benchmarks.harness as harness
    from benchmarks.dataset import as_switch, flatten
    from sb3_grpo import SwitchArguments

    arguments = {"clip_range": 0.05, "n_epochs": 3}
    entry = {"n_envs": 2, "n_steps": 64, "group_size": 2, "learning_rate": "lin_1e-3"}
    zoo = dict(entry, callback=[{"sb3_grpo.SwitchArguments": {"at": 256, "arguments": arguments}}])
    monkeypatch.setattr(harness, "load_hyperparams", lambda algo, env_id: dict(zoo))
    summary = harness.run_cell("grpo", "CartPole-v1", 0, 640, str(tmp_path), eval_freq=128, n_eval_episodes=1)
    assert summary["hyperparams"]["switch"] == {"at": 256, "set": arguments, "schedules": "budget"}
    assert "callback" not in summary["hyperparams"] and flatten(summary["hyperparams"]) == flatten(zoo)

    trained = []
    original = harness.evaluate_model
    monkeypatch.setattr(harness, "evaluate_model", lambda model, *a: (trained.append(model), original(model, *a))[1])
    harness.run_cell("grpo", "CartPole-v1", 0, 640, str(tmp_path / "again"), eval_freq=10_000, n_eval_episodes=1)
    monkeypatch.setattr(harness, "load_hyperparams", lambda algo, env_id: dict(entry))
    model, _, _ = harness.build("grpo", "CartPole-v1", 0)
    model.learn(640, callback=SwitchArguments(256, arguments))
    assert model.clip_range(0.0) == 0.05 and model.n_epochs == 3
    vector = th.nn.utils.parameters_to_vector
    th.testing.assert_close(vector(trained[-1].policy.parameters()), vector(model.policy.parameters()))
    assert as_switch(entry) is entry  # an entry without the callback is left as it is
