"""The repository reads as a product: no working-notes vocabulary, no benchmark cells in git, no link to a repository
that does not exist, README examples that run as written, zoo entries with short comments."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BANNED_WORD = re.compile(r"\bsessions?\b", re.IGNORECASE)
# This project has no public repository or documentation site yet: a URL naming one points nowhere.
PROJECT_URL = re.compile(r"github\.com/(sb3-grpo\b|[\w.-]+/sb3[-_]grpo\b)|sb3[-_]grpo\.readthedocs\.io", re.IGNORECASE)


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.decode().split("\0") if name]


def tracked_text() -> dict[str, str]:
    texts = {}
    for path in tracked_files():
        if not path.is_file():  # deleted in the working tree, not yet in the index
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary: images, gzip
        texts[str(path.relative_to(ROOT))] = data.decode("utf-8", errors="replace")
    return texts


def test_no_tracked_text_says_session():
    hits = [
        f"{name}:{number}: {line.strip()}"
        for name, text in tracked_text().items()
        for number, line in enumerate(text.splitlines(), 1)
        if BANNED_WORD.search(line)
    ]
    assert not hits, "say what a thing does, what it scores and the command; not when it was found:\n" + "\n".join(hits)


def test_no_benchmark_cells_in_git():
    """Harness cells go to benchmarks/work/ (ignored) and then to the results table, never into git one by one."""
    cells = [p for p in tracked_files() if p.is_relative_to(ROOT / "benchmarks" / "results" / "raw")]
    cells += [p for p in tracked_files() if p.is_relative_to(ROOT / "benchmarks" / "work")]
    assert not cells, f"{len(cells)} per-cell files are tracked, e.g. {cells[0].relative_to(ROOT)}"
    data = sum(p.stat().st_size for p in tracked_files() if p.is_relative_to(ROOT / "benchmarks" / "results") and p.exists())
    assert data < 8 * 2**20, f"benchmarks/results/ holds {data / 2**20:.1f} MiB: keep results compact (CSV.gz tables)"


def test_no_url_of_a_repository_that_does_not_exist():
    hits = [
        f"{name}:{number}: {line.strip()}"
        for name, text in tracked_text().items()
        for number, line in enumerate(text.splitlines(), 1)
        if PROJECT_URL.search(line)
    ]
    assert not hits, "this project has no public repository or docs site yet; leave the URL out:\n" + "\n".join(hits)


def test_zoo_entries_have_at_most_two_comment_lines():
    for path in sorted((ROOT / "zoo_configs").glob("*.yml")):
        lines = path.read_text().splitlines()
        for key in yaml.safe_load("\n".join(lines)):
            (index,) = [i for i, line in enumerate(lines) if line.startswith(f"{key}:")]
            above = 0
            while index - above - 1 >= 0 and lines[index - above - 1].startswith("#"):
                above += 1
            assert 1 <= above <= 2, f"{path.name}: {key} has {above} comment lines (what it scores, and the command)"


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_readme_python_examples_run_as_written(tmp_path):
    """Every Python block of the README, in order in one interpreter, with training capped at a few hundred steps."""
    blocks = readme_python_blocks()
    assert len(blocks) >= 4
    driver = textwrap.dedent(
        """
        import functools, os
        import torch
        torch.set_num_threads(1)
        from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

        original = OnPolicyAlgorithm.learn

        @functools.wraps(original)
        def short_learn(self, total_timesteps=100_000, *args, **kwargs):
            return original(self, min(total_timesteps, 256), *args, **kwargs)

        OnPolicyAlgorithm.learn = short_learn
        """
    )
    script = tmp_path / "readme_examples.py"
    script.write_text(driver + "\n".join(f"# ---- README block {i}\n{block}" for i, block in enumerate(blocks)))
    env = dict(os.environ, SB3_GRPO_LOAD_PLUGINS="", OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"a README example failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
