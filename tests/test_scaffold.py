"""``sb3-grpo new-plugin NAME``: the distribution it writes imports, registers its three names, passes its own tests and
lint as generated; a bad name or an existing folder is refused without writing anything."""

import subprocess
import sys

import pytest

from sb3_grpo.cli import main


def test_new_plugin_writes_a_distribution_whose_own_tests_pass(tmp_path, capsys):
    assert main(["new-plugin", "my_rewards", "--dir", str(tmp_path)]) == 0
    root = tmp_path / "sb3-grpo-my-rewards"
    assert str(root) in capsys.readouterr().out
    pyproject = (root / "pyproject.toml").read_text()
    assert '[project.entry-points.sb3_grpo]\nmy_rewards = "sb3_grpo_my_rewards.hooks"' in pyproject
    # the generated tests, with the plugin registered in-process as its entry point would load it once installed
    script = (
        "import sys, pytest, sb3_grpo, sb3_grpo_my_rewards.hooks as hooks; "
        "sb3_grpo.register_plugin(hooks, name='my_rewards'); "
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests']))"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "4 passed" in result.stdout
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(root)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


@pytest.mark.parametrize("name", ["My-Plugin", "1st", "class", "", "ab_", "a__b"])
def test_a_name_that_is_no_identifier_is_refused(tmp_path, capsys, name):
    assert main(["new-plugin", name, "--dir", str(tmp_path)]) == 2
    assert "lower-case letters, digits and single underscores" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_an_existing_folder_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "sb3-grpo-mine").mkdir()
    (tmp_path / "sb3-grpo-mine" / "keep.txt").write_text("mine")
    assert main(["new-plugin", "mine", "--dir", str(tmp_path)]) == 2
    assert "exists already" in capsys.readouterr().err
    assert (tmp_path / "sb3-grpo-mine" / "keep.txt").read_text() == "mine"
