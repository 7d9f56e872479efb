"""benchmarks/option_studies.py: a tiny study end to end, the table's shape, and the metrics on a hand-made run."""

import numpy as np
import pytest

from benchmarks import option_studies
from benchmarks.option_studies import (
    CLIPPED,
    DROPPED,
    KL_IN_BAND,
    SKIPPED,
    STUDIES,
    RunLog,
    Study,
    format_table,
    main,
    overshoot_note,
    parameter_difference,
)


def test_a_tiny_study_prints_one_row_per_setting(capsys):
    args = "--study importance_sampling_level --envs CartPole-v1 --seeds 0 1 --budget 300 --eval-freq 200"
    main([*args.split(), "--n-eval-episodes", "1", "--settings", "step", "trajectory (GSPO)"])
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("|")]
    n_columns = 3 + len(STUDIES["importance_sampling_level"].metrics)
    assert len(table) == 2 + 2  # header, separator, a row per setting asked for
    assert table[0] == (
        "| importance_sampling_level | final eval | seeds reaching 475 | ratio clip fraction | approx KL per update "
        "| grad steps per update |"
    )
    assert all(line.count("|") == n_columns + 1 for line in table)
    assert [line.split(" | ")[0] for line in table[2:]] == ["| step", "| trajectory (GSPO)"]
    assert "300 steps, seeds 0 1" in out
    # Two seeds: "mean ± std" in every cell of a measured column, "k/2" seeds at the threshold.
    for line in table[2:]:
        cells = line.strip("|").split(" | ")
        assert "±" in cells[1] and cells[2].strip().startswith(("0/2", "1/2", "2/2"))
        assert all("±" in cell for cell in cells[3:])


def test_metrics_and_table_from_hand_made_runs(monkeypatch):
    monkeypatch.setitem(STUDIES, "made_up", Study("grpo", "made_up", ("CartPole-v1",), (), (DROPPED, SKIPPED)))
    runs = [
        RunLog(
            grad_norms=[0.2, 1.0, 3.0, 0.4], max_grad_norm=0.5, dropped=[0.0, 1.0, 0.5, 0.5], evals=[(100, 10.0), (200, 480.0)]
        ),
        RunLog(grad_norms=[0.1, 0.1], max_grad_norm=0.5, dropped=[0.0, 0.0], evals=[(100, 20.0), (200, 30.0)]),
    ]
    assert CLIPPED.fn(runs[0]) == 0.5 and CLIPPED.fn(runs[1]) == 0.0
    assert DROPPED.fn(runs[0]) == 0.5 and SKIPPED.fn(runs[0]) == 0.25
    table = format_table("made_up", "CartPole-v1", {"x": runs}).splitlines()
    assert table[2] == "| x | 255.0 ± 225.0 | 1/2, median 200 steps | 0.25 ± 0.25 | 0.12 ± 0.12 |"


def test_kl_band_counts_updates_within_a_factor_of_1_5_of_the_target():
    run = RunLog(target_kl=0.01, updates=[{"train/kl": kl} for kl in (0.001, 0.007, 0.01, 0.015, 0.02)])
    assert KL_IN_BAND.fn(run) == pytest.approx(3 / 5)


def test_every_study_names_options_the_algorithm_takes():
    import inspect

    from benchmarks.harness import algorithm_class

    for name, study in STUDIES.items():
        parameters = inspect.signature(algorithm_class(study.algo)).parameters
        if name in option_studies.REMOVED_OPTIONS:  # the study led to its removal
            assert name not in parameters, name
            continue
        for _, overrides in study.variants:
            assert set(overrides) <= set(parameters), (name, overrides)
        assert study.option == name and any(name in overrides for _, overrides in study.variants)


def test_grad_norm_recording_restores_torch():
    import torch

    original = torch.nn.utils.clip_grad_norm_
    norms: list[float] = []
    p = torch.nn.Parameter(torch.ones(4))
    p.grad = torch.full((4,), 2.0)
    with option_studies._recording_grad_norms(norms):
        torch.nn.utils.clip_grad_norm_([p], 1.0)
    assert torch.nn.utils.clip_grad_norm_ is original
    assert np.isclose(norms, [4.0]).all() and np.isclose(p.grad.norm().item(), 1.0, atol=1e-5)


def test_an_unknown_setting_names_the_study_s_settings():
    with pytest.raises(ValueError, match=r"Unknown settings \['G=5, mean'\] for the group_loss_scale study.*'G=4, mean'"):
        option_studies.run_study("group_loss_scale", [0], settings=["G=5, mean"])


def test_a_constant_loss_scale_is_the_same_training_as_scaled_clipping_and_adam_eps():
    # group_loss_scale="sqrt" multiplies the loss by sqrt(G) = 2: with Adam that is max_grad_norm and eps halved.
    sqrt = {"group_size": 4, "group_loss_scale": "sqrt"}
    scaled = {"group_size": 4, "max_grad_norm": 0.25, "policy_kwargs": {"optimizer_kwargs": {"eps": 0.5e-5}}}
    assert parameter_difference("grpo", sqrt, scaled, steps=400) < 1e-5
    assert parameter_difference("grpo", sqrt, {"group_size": 4}, steps=400) > 1e-3  # the control: it does train


def test_overshoot_note_names_the_settings_that_trained_past_the_budget():
    runs = {
        "G=4": [RunLog(evals=[(50_400, 1.0)]), RunLog(evals=[(50_100, 1.0)])],
        "G=32": [RunLog(evals=[(63_416, 1.0)]), RunLog(evals=[(51_000, 1.0)])],
    }
    note = overshoot_note(runs, 50_000)
    assert note.endswith("over 50,000 by more than 5%: G=32: 63,416.")
    assert overshoot_note({"G=4": runs["G=4"]}, 50_000) == ""
