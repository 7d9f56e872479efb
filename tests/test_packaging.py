"""The package as a user installs it: a built wheel and sdist pass ``twine check``, and the wheel, installed in a
fresh virtual environment, runs the README's quick start (configs, envs and plugins included)."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

build = pytest.importorskip("build")
if not hasattr(build, "ProjectBuilder"):  # a build/ folder of the checkout on sys.path, not the package
    pytest.skip("the build package is not installed (the dev extra installs it)", allow_module_level=True)


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist, and the wheel built from the unpacked sdist (as pip builds from an sdist), so the wheel shows what
    the sdist holds: no stale file of an earlier build in the checkout reaches it."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            "--skip-dependency-check",
            "--outdir",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    return out


def test_wheel_and_sdist_metadata_pass_twine_check(dist):
    pytest.importorskip("twine")
    files = sorted(str(p) for p in dist.iterdir())
    assert any(f.endswith(".whl") for f in files) and any(f.endswith(".tar.gz") for f in files)
    result = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_wheel_installed_in_a_fresh_venv_runs_the_quick_start(dist, tmp_path):
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "sb3_grpo/zoo/configs/grpo.yml" in names and "sb3_grpo/py.typed" in names
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    # The wheel's files in the fresh environment's own site-packages; its dependencies (torch, SB3, ...) from this
    # environment's, appended after it as a plain path (so this checkout's editable install is not seen).
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    example = tmp_path / "grpo_cartpole.py"
    shutil.copy(ROOT / "examples" / "grpo_cartpole.py", example)
    env = {**os.environ, "PYTHONPATH": "", "PYTHONNOUSERSITE": "1"}
    locate = "import sb3_grpo, sb3_grpo.zoo.registry as r; print(sb3_grpo.__file__); print(r.default_config_path('grpo'))"
    where = subprocess.run(
        [str(python), "-c", locate], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert all(path.startswith(str(site)) for path in where), where
    result = subprocess.run(
        [str(python), str(example), "--steps", "2000"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "eval:" in result.stdout
