"""benchmarks/aggregate.py and the modules it runs (stats, dataset, blocks, plots): the statistics against
hand-computed values, the tables on a small fixture table, and the committed pages against the committed data."""

import csv
import functools
import itertools
import json

import numpy as np
import pytest
import yaml

from benchmarks import aggregate, blocks, dataset, harness, table
from benchmarks.aggregate import bootstrap_ci, change, fisher_exact, iqm, load, mann_whitney, select

ROOT = table.ROOT


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm([1, 2, 3, 4, 100, -50, 5, 6]) == pytest.approx((2 + 3 + 4 + 5) / 4)
    assert iqm([7.0]) == 7.0


def test_stratified_bootstrap_resamples_within_each_task():
    lo, hi = bootstrap_ci([np.zeros(4), np.ones(4)], stat="mean")
    # Each resample keeps 4 runs of each task: the pooled mean is always 0.5.
    assert lo == hi == pytest.approx(0.5)
    lo, hi = bootstrap_ci(np.array([1.0, 2.0, 3.0, 4.0]), stat="mean")
    assert 1.0 <= lo < 2.5 < hi <= 4.0


def test_fisher_and_mann_whitney_match_scipy():
    # Values of scipy.stats.fisher_exact and mannwhitneyu(method="asymptotic") for the same inputs.
    assert fisher_exact(8, 2, 1, 5) == pytest.approx(0.034965034965034975)
    assert fisher_exact(19, 1, 12, 8) == pytest.approx(0.019656019656019656)
    assert fisher_exact(3, 0, 0, 3) == pytest.approx(0.1)
    assert mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(0.012185780355344813)
    assert mann_whitney([1, 2, 2, 3, 5, 8], [2, 4, 6, 6, 9, 11, 12]) == pytest.approx(0.07216011300239511)


def test_change_names_what_a_variant_sets_differently():
    base = {"gamma": 0.99, "learning_rate": "lin_2e-3", "normalize": False, "policy_kwargs": "dict(log_std_init=-1)"}
    variant = {"gamma": 0.999, "learning_rate": "lin_0.002", "policy_kwargs": "dict(log_std_init=-2, ortho_init=False)"}
    assert change(base, variant) == "gamma 0.999, policy_kwargs.log_std_init -2, policy_kwargs.ortho_init false"
    assert change(variant, variant) == "(same)"
    assert change({"n_epochs": 10, "ent_coef": 0.01}, {"n_epochs": 10}) == "no ent_coef"


# ---- a small table ----------------------------------------------------------------------------------------------

ENVS = {**dict.fromkeys(aggregate.CLASSIC, 100_000), **dict.fromkeys(aggregate.LARGE, 100_000)}


#: The fixture's GRPO configurations run under a sweep name at 300k (as the MuJoCo ones of the real table are).
FIXTURE_SWEEPS = {"HalfCheetah-v5": "grpo:hc_rerun11", "Hopper-v5": "grpo:hop_antl15g1lr5"}


def fixture_cells():
    """Three seeds of every algorithm on every env, the GRPO configurations of ``FIXTURE_SWEEPS`` and PPO also at
    300k. The final evaluation is a known function of the cell, so the expected numbers can be written by hand."""
    cells = []
    names = [(a, "") for a in aggregate.ORDER] + [tuple(v.split(":")) for v in FIXTURE_SWEEPS.values()]
    for env, budget in ENVS.items():
        for algo, variant in names:
            if variant and FIXTURE_SWEEPS.get(env) != f"{algo}:{variant}":
                continue
            for b in (budget, 300_000) if algo == "ppo" and env in FIXTURE_SWEEPS else (budget,):
                budget_ = 300_000 if variant else b
                for seed in range(3):
                    final = 1000.0 + 10 * aggregate.ORDER.index(algo) + seed + (500 if budget_ == 300_000 else 0)
                    cells.append(
                        {
                            **dict(algo=algo, variant=variant, env=env, seed=seed, budget=budget_, final_eval=final),
                            **dict(best_eval=final, steps_to_threshold=20_000 * (seed + 1), seconds_to_threshold=10.0),
                            **dict(train_seconds=100.0, fps=1000.0, update_ms=5.0, n_updates=10, rss_start_mb=300.0),
                            **dict(peak_rss_mb=310.0, used_step_fraction=None, date=f"2026-01-0{seed + 1}"),
                            **dict(commit=f"c{seed}", hyperparams=json.dumps({"gamma": 0.99})),
                            **{c: "x" for c in table.VERSION_COLUMNS},
                        }
                    )
    return cells


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(dataset, "ENTRY_CHANGES", {})  # the fixture's cells are the entries as named
    cells = fixture_cells()
    curves = [
        {**{k: c[k] for k in table.KEY}, "timesteps": t, "eval_mean": c["final_eval"] * t / c["budget"], "eval_std": 1.0}
        | {"train_seconds": t / 1000, "rss_mb": 300.0}
        for c in cells
        for t in (c["budget"] // 2, c["budget"])
    ]
    table.write(tmp_path / "cells.csv.gz", table.CELL_COLUMNS, cells)
    table.write(tmp_path / "curves.csv.gz", table.CURVE_COLUMNS, curves)
    return tmp_path


def test_the_table_files_round_trip_and_are_byte_stable(results, tmp_path):
    rows = table.read_cells(results / "cells.csv.gz")
    assert len(rows) == len(fixture_cells())
    again = tmp_path / "again.csv.gz"
    table.write(again, table.CELL_COLUMNS, reversed(rows))
    assert again.read_bytes() == (results / "cells.csv.gz").read_bytes()


def test_load_names_a_second_budget_apart(results):
    summaries, curves = load(results / "cells.csv.gz", results / "curves.csv.gz")
    names = {(s["env"], s["algo"], s["budget"]) for s in summaries}
    assert ("Hopper-v5", "ppo", 100_000) in names and ("Hopper-v5", "ppo@300k", 300_000) in names
    assert ("Hopper-v5", "grpo:hop_antl15g1lr5", 300_000) in names  # its only budget keeps the name
    assert curves[("ppo@300k", "Hopper-v5", 2)].tolist() == [
        [150_000, 761.0, 1.0, 150.0, 300.0],
        [300_000, 1522.0, 1.0, 300.0, 300.0],
    ]
    chosen = select(summaries, envs=["Hopper-v5"], algos=["ppo@300k"], seeds=[0, 1])
    assert sorted(s["seed"] for s in chosen) == [0, 1]


def test_entry_reruns_compare_the_seeds_both_ran():
    def cell(name, seed, final, date, commit):
        return dict(env="CartPole-v1", algo=name, seed=seed, final_eval=final, date=date, commit=commit)

    first = [cell("grpo", s, f, f"2026-01-0{s + 1}", f"a{s}") for s, f in enumerate([480.0, 490.0, 500.0, 300.0])]
    rerun = [cell("grpo:again", s, f, "2026-02-01", "b0") for s, f in enumerate([480.0, 470.0, 500.0])]
    data = aggregate.Data(first + rerun, {}, ROOT)
    spec = {"rows": [["CartPole-v1", "grpo", "grpo:again"]]}
    row = blocks.entry_reruns(data, spec).splitlines()[2]
    # seeds 0-2 only (seed 3 has no rerun); 475 is CartPole's threshold: 3 and 2 finals at it; seeds 0 and 2 identical
    assert row.startswith(
        "| CartPole-v1 | GRPO | 0-2 | 2026-01-01 to 2026-01-03, a2 | 2026-02-01, b0 | 490.0 ± 8.2 | 483.3 ± 12.5 | 3 / 2 "
        "| 2 of 3 |"
    )
    with pytest.raises(KeyError, match="grpo:nope"):
        blocks.entry_reruns(data, {"rows": [["CartPole-v1", "grpo", "grpo:nope"]]})


def test_versus_pairs_a_longer_run_with_the_baseline_on_the_seeds_both_ran():
    def cell(env, name, seed, final):
        return dict(env=env, algo=name, seed=seed, final_eval=final, date="2026-01-01", commit="a0")

    cells = [cell("Hopper-v5", "grpo@3000k", s, f) for s, f in enumerate([2000.0, 3000.0, 2500.0])]
    cells += [cell("Hopper-v5", "ppo@1000k", s, f) for s, f in [(0, 1000.0), (1, 1000.0), (3, 500.0)]]
    cells += [cell("Walker2d-v5", "grpo:w@4000k", 0, 4000.0), cell("Walker2d-v5", "ppo", 0, 2000.0)]
    data = aggregate.Data(cells, {}, ROOT)
    spec = {
        "budget": "the baseline's seconds",
        "pairs": [["Hopper-v5", "grpo@3000k", "ppo@1000k"], ["Walker2d-v5", "grpo:w@4000k", "ppo"]],
    }
    lines = blocks.versus(data, spec).splitlines()
    # seeds 0-1 only (seed 2 has no PPO cell, seed 3 no GRPO cell): 2500 ± 500 against 1000 ± 0; no counts without `near`
    assert lines[:4] == [
        "| env (the baseline's seconds) | seeds | GRPO | SB3 PPO | mean ratio | Mann-Whitney p |",
        "|---|---|---|---|---|---|",
        "| Hopper-v5, 3000k steps | 0-1 | 2500 ± 500 (median 2500) | 1000 ± 0 (median 1000) | 2.50 | 0.22 |",
        "| Walker2d-v5 `w`, 4000k steps | 0 | 4000 ± 0 (median 4000) | 2000 ± 0 (median 2000) | 2.00 | 1.00 |",
    ]
    with_counts = blocks.versus(data, {**spec, "near": 990}).splitlines()
    assert with_counts[2].endswith("| 2.50 | 2 vs 2 of 2 (Fisher p = 1.00) | 0.22 |")  # Hopper-v5's count_above: 1000
    assert with_counts[-1].startswith("GRPO on Hopper-v5 over all its 3 seeds: 3 above 1000, median 2500.0, 0 below 990.")


def test_late_falls_count_the_runs_that_end_at_a_share_of_their_best():
    def cell(env, name, seed, evals):
        return dict(env=env, algo=name, seed=seed, final_eval=evals[-1], best_eval=max(evals), date="2026-01-01", commit="a0")

    runs = {
        ("Hopper-v5", "grpo", 0): [100.0, 1000.0, 900.0],  # 900 / 1000 = 0.9 is at the share; means of 2: 950 / 950
        ("Hopper-v5", "grpo", 1): [1000.0, 1000.0, 880.0],  # 0.88; means of 2: 940 / 1000
        ("Hopper-v5", "ppo", 0): [1000.0, 200.0, 200.0],  # 0.20; means of 2: 200 / 600
        ("Walker2d-v5", "grpo", 3): [600.0, 400.0, 500.0, 500.0],  # 500 / 600; means of 2: 500 / 500
        ("Walker2d-v5", "ppo", 3): [300.0, 1000.0, 400.0, 950.0],  # 0.95; means of 2: 675 / 700 = 0.964
    }
    cells = [cell(env, name, seed, evals) for (env, name, seed), evals in runs.items()]
    curves = {(name, env, seed): np.array([[k, e] for k, e in enumerate(evals)]) for (env, name, seed), evals in runs.items()}
    data = aggregate.Data(cells, curves, ROOT)
    spec = {"share": 0.9, "window": 2, "rows": [["Hopper-v5", "grpo", "ppo"], ["Walker2d-v5", "grpo", "ppo"]]}
    rows = blocks.late_falls(data, spec).splitlines()[2:8]
    assert rows == [
        "| Hopper-v5 | GRPO | 2 | 1 | 0.88 | 2 | 0.94 | 1: 0.88 (0.94) |",
        "| Hopper-v5 | SB3 PPO | 1 | 0 | 0.20 | 0 | 0.33 | 0: 0.20 (0.33) |",
        "| Walker2d-v5 | GRPO | 1 | 0 | 0.83 | 1 | 1.00 | 3: 0.83 (1.00) |",
        "| Walker2d-v5 | SB3 PPO | 1 | 1 | 0.95 | 1 | 0.96 | - |",
        "| all | GRPO | 3 | 1 | 0.83 | 3 | 0.94 |  |",
        "| all | SB3 PPO | 2 | 1 | 0.20 | 1 | 0.33 |  |",
    ]
    with pytest.raises(KeyError, match="ppo@1000k"):
        blocks.late_falls(data, {**spec, "rows": [["Hopper-v5", "grpo", "ppo@1000k"]]})
    del curves[("grpo", "Hopper-v5", 1)]
    with pytest.raises(KeyError, match="no learning curve for 'grpo' on Hopper-v5, seed 1"):
        blocks.late_falls(data, spec)


def test_generated_blocks_are_rewritten_and_checked(results, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n<!-- aggregate: classic -->\nSTALE\n<!-- /aggregate -->\n\n"
        "<!-- aggregate: headline -->\n<!-- /aggregate -->\n"
    )
    with pytest.raises(SystemExit, match="out of date"):
        aggregate.main(["--results", str(results), "--pages", str(page), "--check"])
    aggregate.main(["--results", str(results), "--pages", str(page), "--no-plots"])
    text = page.read_text()
    assert "STALE" not in text
    # GRPO on CartPole: finals 1000, 1001, 1002 (ORDER index 0); reaches the threshold at 20k, 40k, 60k: median 40k.
    assert "| CartPole-v1 | GRPO | 100k | 3 | 1001.0 ± 0.8 | 1001.0 [1000.0, 1002.0] | 3/3 | 40k | 10 |" in text
    # SB3 PPO (index 2) on Pendulum: 1020-1022.
    assert "| Pendulum-v1 | SB3 PPO | 100k | 3 | 1021.0 ± 0.8 |" in text
    assert "45 cells run 2026-01-01 to 2026-01-03, 3 commits (newest c2)." in text
    # Headline: GRPO on classic control, normalised finals 1000-1002 on three envs; IQM of 9 = mean of the middle 5.
    normalised = sorted(
        (final - aggregate.NORMALISATION[env][0]) / (aggregate.NORMALISATION[env][1] - aggregate.NORMALISATION[env][0])
        for env in aggregate.CLASSIC
        for final in (1000.0, 1001.0, 1002.0)
    )
    assert f"| GRPO | SB3 PPO | classic control | CartPole 3, Acrobot 3, Pendulum 3 | {np.mean(normalised[2:7]):.2f} [" in text
    aggregate.main(["--results", str(results), "--pages", str(page), "--check"])  # now current
    page.write_text(page.read_text().replace("1001.0 ± 0.8", "1001.5 ± 0.8", 1))
    with pytest.raises(SystemExit, match="out of date"):
        aggregate.main(["--results", str(results), "--pages", str(page), "--check"])


def test_a_name_without_cells_is_refused(results, tmp_path, monkeypatch):
    """A block names its cells (``ppo@1000k``: a second budget); a name no cell has is an error, not a blank cell."""
    data = aggregate.Data(*load(results / "cells.csv.gz", results / "curves.csv.gz"), results)
    spec = {"rows": [["Hopper-v5", 300_000, {"ppo": "ppo@300k"}]]}
    assert "| Hopper-v5 (300k) |" in blocks.overview(data, spec)
    spec["rows"][0][2]["ppo"] = "ppo@1000k"
    with pytest.raises(KeyError, match=r"no cells named 'ppo@1000k' on Hopper-v5; the names there: .*ppo, ppo@300k"):
        blocks.overview(data, spec)
    with pytest.raises(KeyError, match="no cells named 'grpo:nope'"):
        blocks.per_env(data, {"envs": ["Hopper-v5"], "first": {"Hopper-v5": ["grpo:nope"]}})
    monkeypatch.setitem(blocks.BLOCKS, "overview", functools.partial(blocks.overview, spec=spec))
    page = tmp_path / "page.md"
    page.write_text("<!-- aggregate: overview -->\n<!-- /aggregate -->\n")
    with pytest.raises(SystemExit, match="generated block 'overview': no cells named 'ppo@1000k' on Hopper-v5"):
        aggregate.main(["--results", str(results), "--pages", str(page), "--no-plots"])


def test_unknown_block_is_refused(results, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- aggregate: nope -->\n<!-- /aggregate -->\n")
    with pytest.raises(SystemExit, match="unknown generated block 'nope'"):
        aggregate.main(["--results", str(results), "--pages", str(page), "--no-plots"])


def test_plots_from_the_fixture(results, tmp_path):
    pytest.importorskip("matplotlib")
    (results / "throughput.csv").write_text(
        "env,algo,steps,fps,update_ms,n_updates,update_share,peak_rss_mb,fps_ratio,update_ratio,rss_ratio\n"
        "CartPole-v1,ppo,100,10,1.0,1,0.5,300,1.00,1.00,1.00\nCartPole-v1,grpo,100,20,1.0,1,0.5,300,2.00,1.00,1.00\n"
    )
    _write_wallclock(results)
    data = aggregate.Data(*load(results / "cells.csv.gz", results / "curves.csv.gz"), results)
    written = aggregate.plots(data, tmp_path / "plots")
    assert [p.name for p in written] == [
        "curves_classic.png",
        "curves_mujoco.png",
        "curves_mujoco_1m.png",
        "headline.png",
        "throughput.png",
        "wallclock_mujoco_1m.png",
    ]
    assert all(p.stat().st_size > 10_000 for p in written)


def _write_wallclock(results):
    """Three bench_wallclock runs on Hopper-v5: at PPO's seconds for 1M steps (run 1), for 300k steps (run 2), and
    for a budget of seconds (run 3), each with two evaluations per algorithm."""
    from benchmarks.bench_wallclock import CURVE_FIELDS, FIELDS

    runs = [("1", "inf", 1_000_448, 500.0), ("2", "inf", 300_032, 150.0), ("3", "60.0", 70_000, 60.0)]
    rows, points = [], []
    for run, seconds, steps, took in runs:
        for algo, given in (("ppo", seconds), ("grpo", str(took))):
            rows.append(dict.fromkeys(FIELDS, "") | {"run": run, "algo": algo, "env": "Hopper-v5", "seed": "0"})
            rows[-1] |= {"seconds": given, "steps": str(steps), "train_seconds": str(took)}
            ret = 1000.0 if algo == "grpo" else 900.0
            points += [
                [run, algo, "Hopper-v5", "0", took / 2, steps // 2, ret / 2],
                [run, algo, "Hopper-v5", "0", took, steps, ret],
            ]
    with open(results / "wallclock.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    with open(results / "wallclock_curves.csv", "w", newline="") as f:
        csv.writer(f).writerows([CURVE_FIELDS, *points])


def test_equal_wall_clock_curves_take_the_runs_at_the_baseline_steps(results):
    """Only run 1 gave PPO 1M steps with no time limit; its curves go against the fraction of PPO's seconds."""
    from benchmarks.bench_wallclock import read
    from benchmarks.plots import wallclock_lines

    _write_wallclock(results)
    rows, points = read(results / "wallclock.csv"), read(results / "wallclock_curves.csv")
    lines = wallclock_lines(rows, points, "Hopper-v5", 1_000_000)
    assert lines == [("grpo", False, [0.5, 1.0], [500.0, 1000.0]), ("ppo", True, [0.5, 1.0], [450.0, 900.0])]
    assert [line[2][-1] for line in wallclock_lines(rows, points, "Hopper-v5", 300_000)] == [1.0, 1.0]  # run 2
    assert wallclock_lines(rows, [], "Hopper-v5", 1_000_000) == []  # runs written before curves were kept


def test_summary_of_a_selection(results, tmp_path):
    out = tmp_path / "summary.md"
    aggregate.main(["--results", str(results), "--summary", str(out), "--envs", "Hopper-v5", "--algos", "ppo@300k"])
    lines = out.read_text().splitlines()
    assert lines[2].startswith("| Hopper-v5 | SB3 PPO | 300k | 3 | 1521.0 ± 0.8 |")
    # a name without cells there is an error that lists the names there, not a table without its row
    with pytest.raises(SystemExit, match=r"no cells named ppo@1000k on Hopper-v5; the names there: .*ppo@300k"):
        aggregate.main(["--results", str(results), "--summary", "-", "--envs", "Hopper-v5", "--algos", "ppo", "ppo@1000k"])


# ---- the committed data -----------------------------------------------------------------------------------------

#: Naming the committed cells needs the commits of the entry changes in the checkout's history (a full clone).
needs_history = pytest.mark.skipif(not dataset._history(), reason="needs the git history of the checkout")


@needs_history
def test_committed_pages_match_the_committed_data():
    """Every generated table of README.md, BENCHMARKS.md and docs/guide/grpo_studies.md is what the data gives."""
    aggregate.main(["--check"])


@needs_history
def test_grpo_entry_cells_are_the_shipped_zoo_entries():
    """The cells shown as GRPO's zoo entry ran with the entry as it ships in zoo_configs/grpo.yml."""
    zoo = yaml.safe_load((ROOT / "zoo_configs" / "grpo.yml").read_text())
    cells, _ = load(curves=None)
    for env in (*aggregate.CLASSIC, "LunarLander-v3"):
        recorded = {
            json.dumps(aggregate.flatten(c["hyperparams"]), sort_keys=True)
            for c in cells
            if (c["env"], c["algo"]) == (env, "grpo")
        }
        assert recorded == {json.dumps(aggregate.flatten(zoo[env]), sort_keys=True)}, f"grpo on {env}"


@needs_history
def test_entry_rerun_cells_are_the_shipped_zoo_entries():
    """Both sides of each entry rerun (BENCHMARKS: classic control, Walker2d-v5 at 1M) ran with the entry as it ships
    in zoo_configs/<algo>.yml, or, for a block that names the entry it reran (``entry``: a sweep file equal to an
    earlier entry), with that; and the rerun's sweep file is that entry."""
    cells, _ = load(curves=None)
    blocks_ = [spec for spec in dataset.SPEC["blocks"].values() if spec.get("kind") == "entry_reruns"]
    assert len(blocks_) >= 2, "the classic-control and MuJoCo entry reruns are no longer named in aggregate.yml"
    rows = [(spec.get("entry"), row) for spec in blocks_ for row in spec["rows"]]
    assert rows, "no entry rerun named: the check below would check nothing"
    for entry, (env, first, rerun) in rows:
        algo = rerun.split(":")[0]
        if entry is None:
            zoo = yaml.safe_load((ROOT / "zoo_configs" / f"{algo}.yml").read_text())[env]
        else:
            zoo = harness.load_hyperparams(entry, env)
        sweep = harness.load_hyperparams(rerun, env)
        assert aggregate.flatten(sweep) == aggregate.flatten(zoo), f"{rerun} on {env}"
        for name in (first, rerun):
            recorded = {
                json.dumps(aggregate.flatten(c["hyperparams"]), sort_keys=True)
                for c in cells
                if (c["env"], c["algo"]) == (env, name)
            }
            assert recorded == {json.dumps(aggregate.flatten(zoo), sort_keys=True)}, f"{name} on {env}"


def test_sweep_files_resolve_to_what_their_cells_ran():
    """Every sweep variant with a file in benchmarks/sweeps/ resolves (its ``base`` included) to the hyperparameters
    its cells recorded: a sweep edited after it ran, or a base edited under the sweeps built on it, moves no row
    unseen. Change a sweep that has cells by writing a new one."""
    resolved: dict[tuple[str, str], str | None] = {}
    checked = 0
    for c in table.read_cells():
        if not c["variant"] or not c["hyperparams"]:
            continue
        name, key = f"{c['algo']}:{c['variant']}", (f"{c['algo']}:{c['variant']}", c["env"])
        if key not in resolved:
            try:
                entry = harness.load_hyperparams(name, c["env"])
            except KeyError:  # a retired variant: its file is gone, its hyperparameters are the rows'
                resolved[key] = None
                continue
            entry.pop("n_timesteps", None)
            resolved[key] = json.dumps(aggregate.flatten(entry), sort_keys=True)
        if resolved[key] is not None:
            checked += 1
            recorded = json.dumps(aggregate.flatten(json.loads(c["hyperparams"])), sort_keys=True)
            assert recorded == resolved[key], f"{name} on {c['env']} seed {c['seed']}"
    assert checked > 100, f"only {checked} cells of sweeps with files: the check would check little"


def test_entry_cells_ran_with_todays_constructor_defaults():
    """Our zoo entries' cells that recorded their defaults ran with today's default for every argument the entry
    leaves out: a changed default moves such an entry unseen (as 7f04079 moved GRPO's Acrobot-v1 entry). After
    changing a default, name the old value in the entries whose cells rely on it, or rerun their cells."""
    checked = [c for c in table.read_cells() if c["algo"] in harness.OURS and not c["variant"] and c["defaults"]]
    assert checked, "no entry cell recorded its defaults: the check below would check nothing"
    for c in checked:
        assert harness.changed_defaults(c) == {}, f"{c['algo']} on {c['env']} seed {c['seed']}: (then, now)"


@needs_history
def test_changed_entries_cells_are_the_shipped_zoo_entries():
    """The cells that ENTRY_CHANGES names an algorithm's zoo entry ran with that entry as it ships, and the earlier
    entry's cells are kept under its ``earlier`` name."""
    cells, _ = load(curves=None)
    for (algo, env), entry in aggregate.ENTRY_CHANGES.items():
        zoo = yaml.safe_load((ROOT / "zoo_configs" / f"{algo}.yml").read_text())
        recorded = {
            json.dumps(aggregate.flatten(c["hyperparams"]), sort_keys=True)
            for c in cells
            if (c["env"], c["algo"]) == (env, algo)
        }
        assert recorded == {json.dumps(aggregate.flatten(zoo[env]), sort_keys=True)}, f"{entry.variant} on {env}"
        assert any((c["env"], c["algo"]) == (env, entry.earlier) for c in cells), f"{entry.earlier} on {env}"


def test_cells_are_named_by_the_entry_they_ran(tmp_path, monkeypatch):
    """Where an entry changed, the sweep that is the new entry and the algorithm's own cells from the commit of the
    change on are the entry's (one name; a second budget apart by that name), its cells from before the change the
    earlier entry's."""
    monkeypatch.setattr(dataset, "_history", lambda: {"a" * 12: 0, "b" * 12: 1, "c" * 12: 2})
    entry = dataset.EntryChange("grpo:new", "b" * 12, "grpo:previous")
    monkeypatch.setattr(dataset, "ENTRY_CHANGES", {("grpo", "Hopper-v5"): entry})
    template = next(c for c in fixture_cells() if (c["algo"], c["env"], c["variant"]) == ("grpo", "Hopper-v5", ""))
    cells = [
        {**template, "variant": variant, "seed": seed, "budget": budget, "commit": commit}
        for variant, seed, budget, commit in [
            ("", 0, 1_000_000, "a" * 12),  # before the change: the earlier entry
            ("new", 0, 1_000_000, "a" * 12 + "+dirty"),  # the new entry's sweep, whenever it ran
            ("", 1, 1_000_000, "b" * 12),  # the entry from the change on
            ("", 0, 3_000_000, "c" * 12 + "+dirty"),
            ("other", 0, 1_000_000, "a" * 12),
        ]
    ]
    table.write(tmp_path / "cells.csv.gz", table.CELL_COLUMNS, cells)
    summaries, _ = load(tmp_path / "cells.csv.gz", None)
    assert sorted((s["algo"], s["seed"], s["budget"]) for s in summaries) == [
        ("grpo", 0, 1_000_000),  # the sweep
        ("grpo", 1, 1_000_000),
        ("grpo:other", 0, 1_000_000),
        ("grpo:previous", 0, 1_000_000),
        ("grpo@3000k", 0, 3_000_000),
    ]


def test_wallclock_rows_from_before_an_entry_change_take_its_earlier_name(tmp_path, monkeypatch):
    """A bench_wallclock row records its commit, not its configuration: an algorithm's rows (and their evaluations)
    from commits before its entry changed are named as the change says, later ones and other envs keep the name."""
    from benchmarks.bench_wallclock import CURVE_FIELDS, FIELDS

    monkeypatch.setattr(dataset, "_history", lambda: {"a" * 12: 0, "b" * 12: 1, "c" * 12: 2})
    entry = dataset.EntryChange("grpo:new", "b" * 12, "grpo:old")
    monkeypatch.setattr(dataset, "ENTRY_CHANGES", {("grpo", "Hopper-v5"): entry})
    rows = [
        dict.fromkeys(FIELDS, "1") | {"run": str(run), "algo": algo, "env": env, "commit": commit}
        for run, algo, env, commit in [
            (1, "grpo", "Hopper-v5", "a" * 12 + "+dirty"),
            (1, "ppo", "Hopper-v5", "a" * 12 + "+dirty"),
            (2, "grpo", "Hopper-v5", "b" * 12),
            (3, "grpo", "HalfCheetah-v5", "a" * 12),
        ]
    ]
    with open(tmp_path / "w.csv", "w", newline="") as f:
        csv.DictWriter(f, FIELDS).writeheader()
        csv.DictWriter(f, FIELDS).writerows(rows)
    with open(tmp_path / "c.csv", "w", newline="") as f:
        csv.DictWriter(f, CURVE_FIELDS).writeheader()
        csv.DictWriter(f, CURVE_FIELDS).writerows(
            dict.fromkeys(CURVE_FIELDS, "1") | {k: r[k] for k in ("run", "algo", "env")} for r in rows
        )
    named, points = dataset.read_wallclock(tmp_path / "w.csv", tmp_path / "c.csv")
    assert [r["algo"] for r in named] == ["grpo:old", "ppo", "grpo", "grpo"]
    assert [p["algo"] for p in points] == ["grpo:old", "ppo", "grpo", "grpo"]
    rows[0]["commit"] = "d" * 12  # not in the history (a shallow clone): no guess
    with open(tmp_path / "w.csv", "a", newline="") as f:
        csv.DictWriter(f, FIELDS).writerow(rows[0])
    with pytest.raises(ValueError, match="full clone"):
        dataset.read_wallclock(tmp_path / "w.csv")


def test_provenance_names_the_newest_commit_by_history_within_a_date():
    """Several commits share a date: the newest is the later one in the history, not the larger hash."""
    history = dataset._history()
    if len(history) < 2:
        pytest.skip("needs the git history of the checkout")
    by_place = sorted(history, key=history.get)
    older, newer = next((a, b) for a, b in itertools.pairwise(by_place) if a > b)  # newer hash sorts first
    cells = [{"date": "2026-11-27", "commit": newer}, {"date": "2026-11-27", "commit": older + "+dirty"}]
    assert dataset.provenance(cells).endswith(f"2 commits (newest {newer})")
    cells.append({"date": "2026-11-28", "commit": older})  # a later date wins over the history
    assert dataset.provenance(cells).endswith(f"(newest {older})")
