"""Every Python script in examples/ runs to the end (exit code 0) with a smoke-test budget.

``SB3_GRPO_EXAMPLE_FAST=1`` makes each example train for a couple of thousand steps instead of its full budget; the
full runs (each under two minutes) are what the examples' docstrings describe.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))
ARGS = {"grpo_cartpole.py": ["--steps", "2000"]}  # examples with a command line instead of SB3_GRPO_EXAMPLE_FAST
NEEDS = {  # example -> a module it needs (skipped when that cannot be imported)
    "quickstart_exact_trpo.py": ("sb3_grpo", "ExactTRPO"),
    "quickstart_adaptive_kl_ppo.py": ("sb3_grpo", "AdaptiveKLPPO"),
}


def test_examples_are_found():
    assert {"quickstart_grpo.py", "arithmetic_grpo.py", "save_load_evaluate.py"} <= set(SCRIPTS)
    for name in SCRIPTS:
        if name in ARGS:
            continue
        text = (EXAMPLES / name).read_text()
        assert text.startswith('"""'), f"{name} needs a module docstring saying what it shows and its runtime"
        assert "Runtime:" in text, f"{name}: say the expected runtime in the docstring"


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_runs(name, tmp_path):
    if name in NEEDS:
        module, attribute = NEEDS[name]
        if not hasattr(pytest.importorskip(module), attribute):
            pytest.skip(f"{module}.{attribute} does not exist yet")
    env = dict(os.environ, SB3_GRPO_EXAMPLE_FAST="1", OMP_NUM_THREADS="1", MPLBACKEND="Agg", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *ARGS.get(name, [])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
