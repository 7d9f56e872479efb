"""benchmarks.loss_study: each variant reaches GRPO as the loss it names, rows are appended and skipped once stored,
and the table reads the stored rows."""

from __future__ import annotations

import json

import pytest

import sb3_grpo
from benchmarks import loss_study


def test_every_builtin_loss_has_a_variant():
    from sb3_grpo.default_plugins.policy_losses import BUILTIN_POLICY_LOSSES

    named = {v.get("policy_loss", "clip") for v in loss_study.VARIANTS.values()}
    assert named == set(BUILTIN_POLICY_LOSSES)
    assert set(BUILTIN_POLICY_LOSSES) <= set(sb3_grpo.available_policy_losses())


@pytest.mark.parametrize("task", list(loss_study.TASKS))
def test_a_short_run_per_task_reaches_grpo_with_the_variant(task, monkeypatch, tmp_path):
    _, _, threshold = loss_study.TASKS[task]
    small = 1_024 if task == loss_study.ARITHMETIC else 2_048
    monkeypatch.setitem(loss_study.TASKS, task, (small, small // 2, threshold))
    seen = {}
    original = sb3_grpo.GRPO.learn

    def learn(self, *args, **kwargs):
        seen["loss"], seen["kwargs"] = self.policy_loss, self.policy_loss_kwargs
        return original(self, *args, **kwargs)

    monkeypatch.setattr(sb3_grpo.GRPO, "learn", learn)
    out = tmp_path / "rows.csv"
    page = loss_study.PAGE.read_text()
    loss_study.main(["--variants", "cispo", "clip, dual-clip c=3", "--tasks", task, "--seeds", "0", "--out", str(out)])
    rows = loss_study.read_rows(out)
    assert [(r["variant"], r["task"]) for r in rows] == [("cispo", task), ("clip, dual-clip c=3", task)]
    assert seen == {"loss": "clip", "kwargs": {"clip_ratio_c": 3.0}}
    curve = json.loads(rows[0]["curve"])
    assert curve[-1][0] == int(rows[0]["steps"]) >= small and float(rows[0]["score"]) == curve[-1][1]
    # stored rows are not run again
    monkeypatch.setattr(loss_study, "run", lambda *a: pytest.fail("ran a stored row"))
    loss_study.main(["--variants", "cispo", "--tasks", task, "--seeds", "0", "--out", str(out)])
    assert loss_study.PAGE.read_text() == page  # rows written elsewhere never reach the docs page


def test_report_table_from_rows():
    rows = [
        dict(variant="gspo", task="CartPole-v1", seed=s, score=v, steps_to_threshold=st)
        for s, v, st in [(0, 500.0, 60_000), (1, 400.0, ""), (2, 500.0, 80_000)]
    ]
    text = loss_study.report_table(rows)
    line = next(line for line in text.splitlines() if line.startswith("| gspo"))
    assert "467 ± 47; 70k (2/3)" in line
    assert line.count("| -") == 2  # no Arithmetic-v0 or Pendulum-v1 rows
    assert len(text.splitlines()) == 2 + len(loss_study.VARIANTS)


def test_unknown_variant_is_named():
    with pytest.raises(SystemExit, match="unknown variant 'clipp'"):
        loss_study.main(["--variants", "clipp", "--report"])
