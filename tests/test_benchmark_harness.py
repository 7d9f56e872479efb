"""The benchmark harness reads the hyperparameters it says it reads."""

from pathlib import Path

import pytest
import yaml

from benchmarks.harness import cell_name, load_hyperparams, versions

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("algo", ["grpo", "exact_trpo", "adaptive_kl_ppo"])
def test_default_variant_reads_the_zoo_default_entry_on_any_env(algo):
    table = yaml.safe_load((ROOT / "zoo_configs" / f"{algo}.yml").read_text())
    # CartPole-v1 has its own entry; "<algo>:default" must ignore it and score the `default` entry instead.
    assert table["CartPole-v1"] != table["default"]
    assert load_hyperparams(f"{algo}:default", "CartPole-v1") == table["default"]
    assert load_hyperparams(algo, "CartPole-v1") == table["CartPole-v1"]
    assert load_hyperparams(algo, "MountainCar-v0") == table["default"]  # no entry: rl-zoo's fallback
    assert cell_name(f"{algo}:default", "CartPole-v1", 0, 1000) == f"{algo}-default__CartPole-v1__s0__1000"


def test_v5_envs_fall_back_to_the_v4_entry_then_default():
    assert load_hyperparams("ppo", "Hopper-v5") == load_hyperparams("ppo", "Hopper-v4")


def test_sweep_variant_reads_its_sweep_file():
    table = yaml.safe_load((ROOT / "benchmarks" / "sweeps" / "grpo_hop_f.yml").read_text())
    assert load_hyperparams("grpo:hop_f", "Hopper-v5") == table["Hopper-v5"]
    with pytest.raises(KeyError, match="No hyperparameters"):
        load_hyperparams("grpo:hop_f", "CartPole-v1")


def test_env_kwargs_reach_only_the_training_envs(monkeypatch):
    """An entry's ``env_kwargs`` (e.g. a longer training time limit) never changes the evaluation env."""
    import benchmarks.harness as harness

    entry = {"n_envs": 2, "n_steps": 64, "group_size": 2, "env_kwargs": {"max_episode_steps": 700}}
    monkeypatch.setattr(harness, "load_hyperparams", lambda algo, env_id: dict(entry))
    model, eval_env, used = harness.build("grpo", "CartPole-v1", seed=0)
    assert [env.spec.max_episode_steps for env in model.get_env().envs] == [700, 700]
    assert eval_env.envs[0].spec.max_episode_steps == 500  # CartPole-v1's own registration
    assert used["env_kwargs"] == repr({"max_episode_steps": 700})


def test_instruction_count_parsed_from_cachegrind_summary():
    from benchmarks.bench_instructions import parse_instructions

    stderr = "==14164== Command: python -m x\n==14164== \n==14164== I   refs:      10,281,798,785\n"
    assert parse_instructions(stderr) == 10_281_798_785
    assert parse_instructions("==1== Command: python\nKilled\n") is None


def test_aggregate_never_mixes_budgets(tmp_path):
    import json

    from benchmarks.aggregate import load

    for budget, final in ((100_000, 1.0), (300_000, 3.0)):
        for seed in (0, 1):
            cell = {"algo": "ppo", "env": "Hopper-v5", "seed": seed, "budget": budget, "final_eval": final}
            (tmp_path / f"ppo__Hopper-v5__s{seed}__{budget}.json").write_text(json.dumps(cell))
            (tmp_path / f"ppo__Hopper-v5__s{seed}__{budget}.csv").write_text(f"timesteps,mean\n{budget},{final}\n")
    summaries, curves = load(tmp_path)
    by_algo = {(s["algo"], s["seed"]): s["final_eval"] for s in summaries}
    assert by_algo == {("ppo", 0): 1.0, ("ppo", 1): 1.0, ("ppo@300k", 0): 3.0, ("ppo@300k", 1): 3.0}
    assert curves[("ppo@300k", "Hopper-v5", 1)][0].tolist() == [300_000, 3.0]
    assert curves[("ppo", "Hopper-v5", 1)][0].tolist() == [100_000, 1.0]


def test_aggregate_selects_envs_algos_and_seeds():
    from benchmarks.aggregate import select

    cells = [
        {"algo": algo, "env": env, "seed": seed}
        for algo in ("grpo", "ppo@300k")
        for env in ("Acrobot-v1", "Hopper-v5")
        for seed in range(10)
    ]
    assert len(select(cells)) == 40
    chosen = select(cells, envs=["Acrobot-v1"], algos=["grpo"], seeds=[0, 1, 2, 3, 4])
    assert [(c["algo"], c["env"], c["seed"]) for c in chosen] == [("grpo", "Acrobot-v1", s) for s in range(5)]
    assert {c["algo"] for c in select(cells, algos=["ppo@300k"])} == {"ppo@300k"}


def test_cells_record_the_numerical_libraries_and_the_cpu():
    """Cells are not bit-reproducible across machines: what they ran on goes into their summary."""
    import numpy

    recorded = versions()
    assert recorded["numpy"] == numpy.__version__
    assert {"torch", "gymnasium", "stable_baselines3", "sb3_contrib", "machine", "cpu"} <= set(recorded)
    assert recorded["cpu"] and all(isinstance(value, str) for value in recorded.values())
