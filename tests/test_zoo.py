"""
rl-zoo integration: every zoo_configs entry trains through the CLI and loads with ``enjoy``; ``-optimize`` with our
samplers; ``--trial-id`` reloads; packaging of the configs; a real multi-worker study on a throwaway PostgreSQL.

Default tier (one torch thread, about a minute): classic-control entries as written, MuJoCo / Box2D entries shrunk
(``-params n_steps:32`` and 50-step episodes); samplers with rollouts capped for speed. ``-m slow``: every entry as
written for a few thousand steps, uncapped tuning through the console entry. ``postgres``: skipped without
PostgreSQL's server binaries.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import gymnasium as gym
import pytest
import torch as th
import yaml

optuna = pytest.importorskip("optuna")
pytest.importorskip("rl_zoo3")

from optuna.trial import TrialState  # noqa: E402

from sb3_grpo.zoo import UNAVAILABLE, default_config_path, register  # noqa: E402
from sb3_grpo.zoo.cli import main as zoo_main  # noqa: E402
from sb3_grpo.zoo.hyperparams_opt import HYPERPARAMS_CONVERTER, HYPERPARAMS_SAMPLER  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "zoo_configs"
OUR_ALGOS = ("grpo", "exact_trpo", "adaptive_kl_ppo", "reinforce", "online_dpo")
#: The entries each config must have (REINFORCE: the classic benchmark it is measured on; OnlineDPO: its home
#: tasks).
WANTED = {"default", "CartPole-v1", "Acrobot-v1", "Pendulum-v1", "LunarLander-v3", "HalfCheetah-v5", "Hopper-v5"}
WANTED_ENTRIES = {
    "grpo": WANTED | {"sb3_grpo/Arithmetic-v0", "Walker2d-v5"},
    "exact_trpo": WANTED | {"MountainCar-v0"},
    "adaptive_kl_ppo": WANTED | {"MountainCarContinuous-v0", "Walker2d-v5"},
    "reinforce": {"default", "CartPole-v1", "Acrobot-v1"},
    "online_dpo": {"default", "CartPole-v1", "Acrobot-v1", "sb3_grpo/Arithmetic-v0"},
}
#: The env the ``default`` entry is trained on (an env no config lists; cheap, and MlpPolicy reads its observations).
DEFAULT_ENTRY_ENV = "CartPole-v0"
#: Entries whose single rollout is long (Box2D, MuJoCo): shrunk in the default tier, as written under ``-m slow``.
HEAVY_ENVS = (
    "LunarLander-v3",
    "BipedalWalker-v3",
    "HalfCheetah-v5",
    "Hopper-v5",
    "Walker2d-v5",
    "Swimmer-v5",
    "Ant-v5",
)
COMMON = ["--num-threads", "1", "--verbose", "0", "--eval-freq", "-1"]


def _entries() -> list[tuple[str, str]]:
    entries = []
    for algo in OUR_ALGOS:
        path = CONFIG_DIR / f"{algo}.yml"
        if path.is_file():
            entries += [(algo, key) for key in yaml.safe_load(path.read_text())]
    return entries


ENTRIES = _entries()


def _require_algo(algo: str) -> None:
    register()
    if algo in UNAVAILABLE:
        pytest.skip(f"{algo} is not importable yet: {UNAVAILABLE[algo]}")


def _require_env(env_id: str) -> None:
    try:
        gym.make(env_id).close()
    except (ImportError, gym.error.DependencyNotInstalled) as exc:
        pytest.skip(f"{env_id} needs an extra that is not installed: {exc}")


@pytest.fixture(autouse=True)
def _one_thread():
    threads = th.get_num_threads()
    yield
    th.set_num_threads(threads)


def _zoo(*args: str) -> None:
    """One in-process CLI call (the same code path as the console script, without the import cost)."""
    zoo_main([str(arg) for arg in args])


def _saved_config(logs: Path, algo: str, env_id: str) -> dict:
    name = env_id.replace("/", "-")
    (run,) = sorted((logs / algo).glob(f"{name}_*"))
    with open(run / name / "config.yml") as f:
        return dict(yaml.load(f, Loader=yaml.UnsafeLoader))


def _train_and_enjoy(tmp_path: Path, algo: str, env_id: str, *extra: str) -> dict:
    logs = tmp_path / "logs"
    _zoo("train", "--algo", algo, "--env", env_id, "-f", logs, "--seed", 0, *COMMON, *extra)
    name = env_id.replace("/", "-")  # rl-zoo's file names (sb3_grpo/Arithmetic-v0 -> sb3_grpo-Arithmetic-v0)
    (model,) = (logs / algo).glob(f"{name}_*/{name}.zip")
    assert model.stat().st_size > 0
    _zoo("enjoy", "--algo", algo, "--env", env_id, "-f", logs, "--no-render", "-n", 60, "--num-threads", 1, "--verbose", 0)
    return _saved_config(logs, algo, env_id)


# ------------------------------------------------------------------------------------------------------- configs
def test_configs_cover_the_envs_and_say_where_numbers_come_from():
    for algo in OUR_ALGOS:
        wanted = WANTED_ENTRIES[algo]
        text = (CONFIG_DIR / f"{algo}.yml").read_text()
        config = yaml.safe_load(text)
        assert wanted <= set(config), (algo, wanted - set(config))
        lines = text.splitlines()
        for key in config:
            (index,) = [i for i, line in enumerate(lines) if line.startswith(f"{key}:")]
            assert lines[index - 1].startswith("#"), f"{algo}.yml: entry {key} has no comment above it"
        for key, entry in config.items():
            assert "policy" in entry and "n_timesteps" in entry, (algo, key)
            if algo == "exact_trpo":  # gSDE has no closed-form Fisher: ExactTRPO would fall back to CG
                assert not entry.get("use_sde"), (algo, key)


def test_grpo_env_entries_name_their_advantage_estimator():
    """GRPO's default estimator (``group_auto``) has changed before (it was ``group_zscore``), and an entry that left
    it out then trained with another estimator than the one its comment's numbers measured (Acrobot-v1: -175 over
    seeds 0-4 instead of -85). Every entry for an env names it; ``default`` is the constructor's defaults on purpose."""
    config = yaml.safe_load((CONFIG_DIR / "grpo.yml").read_text())
    missing = [key for key, entry in config.items() if key != "default" and "advantage_estimator" not in entry]
    assert not missing, f"grpo.yml: name the advantage_estimator the entry was measured with in {missing}"


def test_grpo_arithmetic_entry_writes_out_the_measured_configuration():
    """The entry's comment quotes benchmarks.family, which trains qa_tasks' ``default`` configuration: the two must
    be the same settings, or the quoted accuracy is not what a zoo user gets."""
    from benchmarks import qa_tasks

    entry = yaml.safe_load((CONFIG_DIR / "grpo.yml").read_text())["sb3_grpo/Arithmetic-v0"]
    measured = dict(qa_tasks.CONFIGS["grpo"]["default"])
    assert measured.pop("extractor") == "flatten" and "policy_kwargs" in entry  # flatten: SB3's MlpPolicy
    assert entry["policy_kwargs"] == f"dict(net_arch={measured.pop('net_arch')}, activation_fn=nn.ReLU)"
    assert measured.pop("activation") == "relu"
    assert measured.pop("reward_functions") == entry["reward_functions"]
    for name, value in measured.items():
        assert entry[name] == value, (name, entry[name], value)


def test_default_config_lookup(tmp_path, monkeypatch):
    for algo in OUR_ALGOS:
        assert default_config_path(algo) == CONFIG_DIR / f"{algo}.yml"
    assert default_config_path("ppo") is None
    (tmp_path / "grpo.yml").write_text("default:\n  policy: MlpPolicy\n  n_timesteps: 10\n")
    monkeypatch.setenv("SB3_GRPO_ZOO_CONFIGS", str(tmp_path))
    assert default_config_path("grpo") == tmp_path / "grpo.yml"
    assert default_config_path("adaptive_kl_ppo") == CONFIG_DIR / "adaptive_kl_ppo.yml"


def test_registration_reaches_every_rl_zoo_lookup():
    import rl_zoo3
    import rl_zoo3.exp_manager as exp_manager
    import rl_zoo3.hyperparams_opt as zoo_opt
    import rl_zoo3.utils as zoo_utils

    registered = register()
    assert "grpo" in registered
    for key, cls in registered.items():
        assert rl_zoo3.ALGOS[key] is cls and zoo_utils.ALGOS[key] is cls and exp_manager.ALGOS[key] is cls
        assert exp_manager.HYPERPARAMS_SAMPLER[key] is zoo_opt.HYPERPARAMS_SAMPLER[key] is HYPERPARAMS_SAMPLER[key]
        assert exp_manager.HYPERPARAMS_CONVERTER[key] is HYPERPARAMS_CONVERTER[key]
    assert {"ppo", "trpo", "a2c", "sac"} <= set(zoo_utils.ALGOS)  # SB3 / sb3-contrib stay
    assert register() is registered  # idempotent


# ----------------------------------------------------------------------------------------------- train + enjoy
@pytest.mark.parametrize(("algo", "key"), ENTRIES, ids=[f"{a}-{k}" for a, k in ENTRIES])
def test_train_and_enjoy_every_entry(tmp_path, algo, key):
    """Every entry through the CLI (as written for classic control; shrunk rollouts for MuJoCo / Box2D)."""
    _require_algo(algo)
    env_id = DEFAULT_ENTRY_ENV if key == "default" else key
    _require_env(env_id)
    if key in HEAVY_ENVS or key == "default":
        extra = ["-n", 200, "-params", "n_steps:32", "--env-kwargs", "max_episode_steps:50"]
    else:
        extra = ["-n", 1500]
    config = _train_and_enjoy(tmp_path, algo, env_id, *extra)
    entry = yaml.safe_load((CONFIG_DIR / f"{algo}.yml").read_text())[key]
    for name, value in entry.items():
        # Shrunk entries: n_steps and env_kwargs come from the command line, which rl-zoo lets override the file.
        if name not in ("n_steps", "env_kwargs") or key not in (*HEAVY_ENVS, "default"):
            assert config[name] == value, (name, config[name], value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("algo", "key"),
    [e for e in ENTRIES if e[1] in (*HEAVY_ENVS, "default")],
    ids=[f"{a}-{k}" for a, k in ENTRIES if k in (*HEAVY_ENVS, "default")],
)
def test_train_and_enjoy_heavy_entries_as_written(tmp_path, algo, key):
    _require_algo(algo)
    env_id = DEFAULT_ENTRY_ENV if key == "default" else key
    _require_env(env_id)
    _train_and_enjoy(tmp_path, algo, env_id, "-n", 4000)


@pytest.mark.parametrize("algo", OUR_ALGOS)
def test_training_goes_on_from_a_trained_agent_with_changed_and_misspelt_arguments(tmp_path, algo):
    """``train -i model.zip`` loads the model with the entry's arguments (rl-zoo passes them to ``load``): one
    changed with ``-params`` reaches the model, a misspelt one is refused by name instead of being set unread."""
    _require_algo(algo)
    logs = tmp_path / "logs"
    _zoo("train", "--algo", algo, "--env", "CartPole-v1", "-f", logs, "--seed", 0, "-n", 300, *COMMON)
    (model,) = (logs / algo).glob("CartPole-v1_*/CartPole-v1.zip")
    _zoo(
        "train", "--algo", algo, "--env", "CartPole-v1", "-f", logs, "--seed", 1, "-n", 300, "-i", model,
        "-params", "learning_rate:0.000123", *COMMON,
    )  # fmt: skip
    (continued,) = (logs / algo).glob("CartPole-v1_2/CartPole-v1.zip")
    with zipfile.ZipFile(continued) as archive:
        saved = json.loads(archive.read("data"))["learning_rate"]
    assert (saved["val"] if isinstance(saved, dict) else saved) == 0.000123  # rl-zoo makes it a ConstantSchedule
    with pytest.raises(ValueError, match=r"'learnig_rate', which .* does not take .* Did you mean 'learning_rate'\?"):
        _zoo(
            "train", "--algo", algo, "--env", "CartPole-v1", "-f", logs, "--seed", 2, "-n", 300, "-i", model,
            "-params", "learnig_rate:0.000123", *COMMON,
        )  # fmt: skip


@pytest.mark.parametrize("flag", ["-conf", "-c", "--conf-file"])
def test_conf_overrides_default_config(tmp_path, flag):
    """Every spelling argparse accepts (rl-zoo's own tests use ``-c``) replaces the default config."""
    conf = tmp_path / "mine.yml"
    conf.write_text("CartPole-v1:\n  policy: MlpPolicy\n  n_timesteps: 300\n  n_envs: 2\n  n_steps: 32\n  group_size: 2\n")
    config = _train_and_enjoy(tmp_path, "grpo", "CartPole-v1", flag, conf)
    assert config["group_size"] == 2 and config["n_steps"] == 32


def test_config_env_kwargs_reach_the_training_envs_only(tmp_path):
    """``env_kwargs`` in a config file (the Hopper entry's longer training time limit) make the training envs; the
    evaluation envs stay the env's own registration, as the benchmark harness evaluates."""
    import argparse

    from rl_zoo3.exp_manager import ExperimentManager

    register()
    conf = tmp_path / "mine.yml"
    conf.write_text(
        "CartPole-v1:\n  policy: MlpPolicy\n  n_timesteps: 300\n  n_envs: 2\n  n_steps: 32\n  group_size: 2\n"
        "  env_kwargs: {max_episode_steps: 700}\n"
    )
    manager = ExperimentManager(
        argparse.Namespace(), "grpo", "CartPole-v1", str(tmp_path / "logs"), config=str(conf), verbose=0
    )
    model, _ = manager.setup_experiment()
    assert [env.spec.max_episode_steps for env in model.get_env().envs] == [700, 700]
    eval_env = manager.create_envs(1, eval_env=True, no_log=True)
    assert eval_env.envs[0].spec.max_episode_steps == 500


@pytest.mark.parametrize(
    "written", ["{scale: batch, eps: 0.01}", "\"dict(scale='batch', eps=0.01)\"", "\"{'scale': 'batch', 'eps': 0.01}\""]
)
def test_advantage_kwargs_in_a_config_as_a_mapping_or_a_python_string(tmp_path, written):
    """A YAML mapping, or a Python string as rl_zoo3 reads ``policy_kwargs`` strings (documented in docs/guide/zoo)."""
    import argparse

    from rl_zoo3.exp_manager import ExperimentManager

    register()
    conf = tmp_path / "mine.yml"
    conf.write_text(
        "CartPole-v1:\n  policy: MlpPolicy\n  n_timesteps: 300\n  n_envs: 2\n  n_steps: 32\n  group_size: 2\n"
        f"  advantage_estimator: group_zscore\n  advantage_kwargs: {written}\n"
    )
    manager = ExperimentManager(argparse.Namespace(), "grpo", "CartPole-v1", str(tmp_path / "logs"), config=str(conf))
    model, _ = manager.setup_experiment()
    assert (model._estimator.scale, model._estimator.eps) == ("batch", 0.01)


def test_a_bad_advantage_kwargs_string_names_the_key(tmp_path):
    import argparse

    from rl_zoo3.exp_manager import ExperimentManager

    register()
    conf = tmp_path / "mine.yml"
    conf.write_text("CartPole-v1:\n  policy: MlpPolicy\n  n_timesteps: 300\n  advantage_kwargs: 'scale=batch'\n")
    manager = ExperimentManager(argparse.Namespace(), "grpo", "CartPole-v1", str(tmp_path / "logs"), config=str(conf))
    with pytest.raises(ValueError, match=r"advantage_kwargs: cannot read 'scale=batch' as a Python dict .*YAML mapping"):
        manager.setup_experiment()


def test_estimator_names_and_options_on_the_command_line(tmp_path):
    """The documented form: rl_zoo3 evaluates -params values as Python, so a name needs quotes inside the value."""
    config = _train_and_enjoy(
        tmp_path, "grpo", "CartPole-v1", "-n", 300, "-params", "n_steps:32", "advantage_estimator:'group_mean'",
        "advantage_kwargs:dict(scale='batch')",
    )  # fmt: skip
    assert config["advantage_estimator"] == "group_mean" and config["advantage_kwargs"] == {"scale": "batch"}


@pytest.mark.parametrize("written", ["{tau_pos: 2.0, tau_neg: 3.0}", '"dict(tau_pos=2.0, tau_neg=3.0)"'])
def test_policy_loss_in_a_config(tmp_path, written):
    """GRPO's policy loss and its options from a zoo file: a YAML mapping or a Python string, as advantage_kwargs."""
    import argparse

    from rl_zoo3.exp_manager import ExperimentManager

    register()
    conf = tmp_path / "mine.yml"
    conf.write_text(
        "CartPole-v1:\n  policy: MlpPolicy\n  n_timesteps: 300\n  n_envs: 2\n  n_steps: 32\n  group_size: 2\n"
        f"  policy_loss: sapo\n  policy_loss_kwargs: {written}\n  kl_estimator: k3+\n  beta: 0.01\n"
        "  top_entropy_quantile: 0.5\n"
    )
    manager = ExperimentManager(argparse.Namespace(), "grpo", "CartPole-v1", str(tmp_path / "logs"), config=str(conf))
    model, _ = manager.setup_experiment()
    loss = model._policy_loss
    assert type(loss).__name__ == "SAPO" and (loss.tau_pos, loss.tau_neg) == (2.0, 3.0)
    assert model.kl_estimator == "k3+" and model.top_entropy_quantile == 0.5


def test_a_training_in_stages_from_a_config(tmp_path, capsys):
    """sb3_grpo.SwitchArguments in a zoo file's callback list: sb3-grpo-zoo train switches the arguments at the step
    and saves the model as it ends (the two-stage training of the long-episodes guide, as one entry)."""
    from sb3_grpo import GRPO

    conf = tmp_path / "stages.yml"
    conf.write_text(
        "CartPole-v1:\n  policy: MlpPolicy\n  n_timesteps: 1500\n  n_envs: 2\n  n_steps: 64\n  group_size: 2\n"
        "  callback:\n    - sb3_grpo.SwitchArguments:\n        at: 700\n        arguments: {gamma: 0.9, clip_range: 0.1}\n"
        "        verbose: 1\n"
    )
    logs = tmp_path / "logs"
    _zoo("train", "--algo", "grpo", "--env", "CartPole-v1", "-f", logs, "--seed", 0, "-conf", conf, "--num-threads", 1)
    assert "SwitchArguments: at 7" in capsys.readouterr().out
    (saved,) = (logs / "grpo").glob("CartPole-v1_*/CartPole-v1.zip")
    model = GRPO.load(saved)
    assert (model.gamma, model.clip_range(1.0)) == (0.9, 0.1) and model.num_timesteps >= 1500


def test_policy_loss_on_the_command_line(tmp_path):
    """``-params``: a loss name and a KL estimator as bare words (k3+ too), the options as a Python dict."""
    config = _train_and_enjoy(
        tmp_path, "grpo", "CartPole-v1", "-n", 300, "-params", "n_steps:32", "policy_loss:clip",
        "policy_loss_kwargs:dict(clip_ratio_c=3.0)", "kl_estimator:k3+", "beta:0.01",
    )  # fmt: skip
    assert config["policy_loss"] == "clip" and config["policy_loss_kwargs"] == {"clip_ratio_c": 3.0}
    assert config["kl_estimator"] == "k3+"


@pytest.mark.parametrize(
    "algo, written",
    [
        ("grpo", "  beta: 0.04\n  kl_in_reward: true\n  kl_target: 0.01\n  kl_horizon: 1000\n"),
        ("online_dpo", ""),
    ],
)
def test_kl_to_reference_options_in_a_config(tmp_path, algo, written):
    """The KL penalty in the reward, the adaptive beta and the moving reference from a zoo file."""
    import argparse

    from rl_zoo3.exp_manager import ExperimentManager

    register()
    conf = tmp_path / "mine.yml"
    conf.write_text(
        "CartPole-v1:\n  policy: MlpPolicy\n  n_timesteps: 300\n  n_envs: 2\n  n_steps: 32\n  group_size: 2\n"
        f"  ref_update_interval: 4\n  ref_mixup_alpha: 0.6\n{written}"
    )
    manager = ExperimentManager(argparse.Namespace(), algo, "CartPole-v1", str(tmp_path / "logs"), config=str(conf))
    model, _ = manager.setup_experiment()
    assert (model.ref_update_interval, model.ref_mixup_alpha) == (4, 0.6)
    if algo == "grpo":
        assert (model.kl_in_reward, model.kl_target, model.kl_horizon, model.beta) == (True, 0.01, 1000, 0.04)


def test_kl_to_reference_options_on_the_command_line(tmp_path):
    config = _train_and_enjoy(
        tmp_path, "grpo", "CartPole-v1", "-n", 300, "-params", "n_steps:32", "beta:0.04", "kl_in_reward:True",
        "kl_target:0.01", "kl_horizon:1000", "ref_update_interval:2", "ref_mixup_alpha:0.5",
    )  # fmt: skip
    assert config["kl_in_reward"] is True and (config["kl_target"], config["kl_horizon"]) == (0.01, 1000)
    assert (config["ref_update_interval"], config["ref_mixup_alpha"]) == (2, 0.5)


def test_clip_range_high_schedule_and_unclipped_adaptive_kl(tmp_path):
    """rl_zoo3 schedules only its own keys and refuses ``None``; registration teaches it ours."""
    config = _train_and_enjoy(
        tmp_path, "grpo", "CartPole-v1", "-n", 300, "-params", "clip_range_high:'lin_0.28'", "n_steps:32"
    )
    assert config["clip_range_high"] == "lin_0.28"
    _require_algo("adaptive_kl_ppo")
    config = _train_and_enjoy(tmp_path, "adaptive_kl_ppo", "CartPole-v1", "-n", 300, "-params", "clip_range:None")
    assert config["clip_range"] is None


def test_sb3_algorithms_still_available(tmp_path):
    _train_and_enjoy(tmp_path, "ppo", "CartPole-v1", "-n", 256, "-params", "n_steps:32")


def test_cli_errors(capsys):
    zoo_main([])
    assert "usage: sb3-grpo-zoo" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown command"):
        zoo_main(["fly"])


def test_python_m_and_console_script_entry_point(tmp_path):
    from importlib.metadata import entry_points

    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    if "sb3-grpo-zoo" in scripts:  # installed (editable or wheel)
        assert scripts["sb3-grpo-zoo"] == "sb3_grpo.zoo.cli:main"
    logs = tmp_path / "logs"
    cmd = [sys.executable, "-m", "sb3_grpo.zoo", "train", "--algo", "grpo", "--env", "CartPole-v1", "-n", "200"]
    cmd += ["-f", str(logs), "-params", "n_steps:32", *COMMON]
    subprocess.run(cmd, check=True, cwd=tmp_path, capture_output=True, timeout=300)
    assert list((logs / "grpo").glob("CartPole-v1_1/CartPole-v1.zip"))


# ------------------------------------------------------------------------------------------ samplers, converters
@pytest.mark.parametrize("algo", OUR_ALGOS)
def test_converter_reproduces_the_sampled_arguments_and_the_class_accepts_them(algo):
    """What ``--trial-id`` retrains with (converter of the stored raw params) is what the trial trained with."""
    _require_algo(algo)
    from stable_baselines3.common.env_util import make_vec_env

    cls = register()[algo]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0), direction="maximize")
    envs = {"discrete": make_vec_env("CartPole-v1", n_envs=2), "box": make_vec_env("Pendulum-v1", n_envs=2)}
    for i in range(12):
        trial = study.ask()
        kwargs = HYPERPARAMS_SAMPLER[algo](trial, 1, 2, {})
        assert HYPERPARAMS_CONVERTER[algo](dict(trial.params)) == kwargs
        assert not any(name.endswith("_pow") or name.startswith("one_minus_") for name in kwargs)
        if i < 4:  # every name is a constructor argument of the real class (discrete and continuous actions)
            cls("MlpPolicy", envs["discrete" if i % 2 else "box"], **kwargs)
        study.tell(trial, 0.0)
    for env in envs.values():
        env.close()


def _capped(sampler):
    """The real sampler (so the real search space is recorded), with rollouts capped to keep the tier fast."""

    def sample(trial, n_actions, n_envs, additional_args):
        kwargs = sampler(trial, n_actions, n_envs, additional_args)
        kwargs["n_steps"] = 32
        for name in ("n_epochs", "n_critic_updates"):
            if name in kwargs:
                kwargs[name] = min(kwargs[name], 2)
        return kwargs

    return sample


CHEAP_UPDATES = {
    "grpo": "n_epochs:1",
    "exact_trpo": "n_critic_updates:1",
    "adaptive_kl_ppo": "n_epochs:1",
    "reinforce": "n_epochs:1",
    "online_dpo": "n_epochs:1",
}
OPTIMIZE_ENV = {
    "grpo": "CartPole-v1",
    "exact_trpo": "Pendulum-v1",
    "adaptive_kl_ppo": "CartPole-v1",
    "reinforce": "CartPole-v1",
    "online_dpo": "CartPole-v1",
}


@pytest.mark.parametrize("storage_kind", ["sqlite", "journal"])
@pytest.mark.parametrize("algo", OUR_ALGOS)
def test_optimize_then_trial_id_reload(tmp_path, monkeypatch, algo, storage_kind):
    """``-optimize --n-trials 2 --sampler random`` on an embedded storage, then ``--trial-id 0`` (rl_zoo3 ignores
    trial 0 without our fix) and ``--trial-id 1`` retrain with the trials' hyperparameters."""
    _require_algo(algo)
    import rl_zoo3.hyperparams_opt as zoo_opt

    monkeypatch.setitem(zoo_opt.HYPERPARAMS_SAMPLER, algo, _capped(HYPERPARAMS_SAMPLER[algo]))
    env_id = OPTIMIZE_ENV[algo]
    storage = f"sqlite:///{tmp_path / 'study.db'}" if storage_kind == "sqlite" else str(tmp_path / "study.log")
    study_args = ["--storage", storage, "--study-name", f"{algo}-test"]
    logs = tmp_path / "logs"
    _zoo(
        "train", "--algo", algo, "--env", env_id, "-f", logs, "-optimize", "--n-trials", 2, "-n", 200,
        "--sampler", "random", "--pruner", "none", "--n-evaluations", 1, "--eval-episodes", 1, "--no-optim-plots",
        "--seed", 3, "--env-kwargs", "max_episode_steps:100", *study_args, *COMMON,
    )  # fmt: skip
    loaded = optuna.load_study(
        study_name=f"{algo}-test",
        storage=storage
        if storage_kind == "sqlite"
        else optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage)),
    )
    trials = loaded.get_trials(deepcopy=False)
    assert len(trials) == 2 and all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    if storage_kind == "journal":
        return
    for trial_id in (0, 1):
        run_logs = tmp_path / f"retrain{trial_id}"
        _zoo(
            "train", "--algo", algo, "--env", env_id, "-f", run_logs, "-n", 100, "--trial-id", trial_id, *study_args,
            "-params", "n_steps:32", CHEAP_UPDATES[algo], "--env-kwargs", "max_episode_steps:100", *COMMON,
        )  # fmt: skip
        config = _saved_config(run_logs, algo, env_id)
        expected = HYPERPARAMS_CONVERTER[algo](dict(trials[trial_id].params))
        for name, value in expected.items():
            if name not in ("n_steps", "n_epochs", "n_critic_updates"):
                assert config[name] == value, (trial_id, name)


@pytest.mark.slow
@pytest.mark.parametrize("algo", OUR_ALGOS)
def test_optimize_uncapped_through_the_console_entry(tmp_path, algo):
    _require_algo(algo)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    cmd = [sys.executable, "-m", "sb3_grpo.zoo", "train", "--algo", algo, "--env", OPTIMIZE_ENV[algo], "-optimize"]
    cmd += ["--n-trials", "2", "-n", "2000", "--sampler", "tpe", "--pruner", "median", "--no-optim-plots"]
    cmd += ["--storage", storage, "--study-name", "s", "-f", str(tmp_path / "logs"), *COMMON]
    subprocess.run(cmd, check=True, cwd=tmp_path, timeout=1200)
    assert len(optuna.load_study(study_name="s", storage=storage).trials) == 2


# --------------------------------------------------------------------------------------------------- packaging
@pytest.mark.slow
def test_wheel_ships_the_configs(tmp_path):
    """A wheel built from the source tree contains zoo_configs/*.yml as sb3_grpo/zoo/configs/*.yml."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "sb3_grpo", src / "sb3_grpo", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "zoo_configs", src / "zoo_configs")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."]
    subprocess.run(cmd, check=True, cwd=src, timeout=600)
    (wheel,) = tmp_path.glob("sb3_grpo-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for algo in OUR_ALGOS:
        assert f"sb3_grpo/zoo/configs/{algo}.yml" in names, sorted(n for n in names if "zoo" in n)


def test_explicit_package_list_is_complete():
    """If pyproject lists packages explicitly (needed to map sb3_grpo.zoo.configs onto zoo_configs/), it must list
    every subpackage, or a wheel silently misses it."""
    tomllib = pytest.importorskip("tomllib")
    setuptools_config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = setuptools_config.get("packages")
    if not isinstance(packages, list):
        pytest.skip("pyproject finds packages itself")
    on_disk = {".".join(init.parent.relative_to(REPO).parts) for init in (REPO / "sb3_grpo").rglob("__init__.py")}
    assert on_disk <= set(packages), sorted(on_disk - set(packages))
    assert setuptools_config.get("package-dir", {}).get("sb3_grpo.zoo.configs") == "zoo_configs"


# -------------------------------------------------------------------------------------- PostgreSQL, two workers
def _postgres_bin_dir() -> Path | None:
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).resolve().parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):  # Debian keeps them off PATH
        if (Path(candidate) / "initdb").is_file() and (Path(candidate) / "pg_ctl").is_file():
            return Path(candidate)
    return None


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def postgres_url():
    """A throwaway PostgreSQL server in a temporary directory; yields the URL of an empty database."""
    bin_dir = _postgres_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found; Debian: apt-get install postgresql")
    pytest.importorskip("psycopg2")
    prefix: list[str] = []
    owner = None
    if os.geteuid() == 0:  # initdb refuses to run as root: run the server as an unprivileged user
        for name in ("postgres", "nobody"):
            try:
                owner = pwd.getpwnam(name)
                break
            except KeyError:
                continue
        runuser = shutil.which("runuser")
        if owner is None or runuser is None:
            pytest.skip("running as root without a 'postgres'/'nobody' user or runuser: cannot start PostgreSQL")
        prefix = [runuser, "-u", owner.pw_name, "--"]
    base = Path(tempfile.mkdtemp(prefix="sb3_grpo_pg_"))
    os.chmod(base, 0o755)
    data, sockets = base / "data", base / "sockets"
    sockets.mkdir()
    if owner is not None:
        os.chown(base, owner.pw_uid, owner.pw_gid)
        os.chown(sockets, owner.pw_uid, owner.pw_gid)
    port = _free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*prefix, *cmd], check=True, capture_output=True, timeout=120, cwd=base)

    started = False
    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", "zoo", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "server.log"), "-w", "start")
        started = True
        import psycopg2

        connection = psycopg2.connect(host="127.0.0.1", port=port, user="zoo", dbname="postgres")
        connection.autocommit = True
        connection.cursor().execute("CREATE DATABASE optuna_zoo")
        connection.close()
        # SQLAlchemy >= 2.1 maps a bare postgresql:// to psycopg 3; name the psycopg2 driver the [test] extra installs.
        yield f"postgresql+psycopg2://zoo@127.0.0.1:{port}/optuna_zoo"
    finally:
        if started:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.postgres
def test_two_workers_share_one_postgres_study(tmp_path, postgres_url):
    """Two tuning worker processes on one study in PostgreSQL: both contribute, no trial is lost or duplicated,
    and the best trial retrains with ``--trial-id``."""
    study_name = "grpo-cartpole-multiworker"
    # Create the study once before starting workers (as the README recipe says): concurrent first-time creation of
    # Optuna's tables can race.
    optuna.create_study(storage=postgres_url, study_name=study_name, direction="maximize")
    conf = tmp_path / "conf.yml"  # one env per worker, short episodes: the test is about the storage, not scores
    conf.write_text("CartPole-v1:\n  policy: MlpPolicy\n  n_timesteps: 400\n  n_envs: 1\n")
    n_trials = 2
    workers = []
    for seed in (1, 2):
        cmd = [sys.executable, "-m", "sb3_grpo.zoo", "train", "--algo", "grpo", "--env", "CartPole-v1"]
        cmd += ["-conf", str(conf), "-optimize", "--n-trials", str(n_trials), "--sampler", "random", "--pruner", "none"]
        cmd += ["--storage", postgres_url, "--study-name", study_name, "--seed", str(seed), "--no-optim-plots"]
        cmd += ["--n-evaluations", "1", "--eval-episodes", "2", "--env-kwargs", "max_episode_steps:200"]
        cmd += ["-f", str(tmp_path / f"worker{seed}"), *COMMON]
        with open(tmp_path / f"worker{seed}.log", "w") as log:  # the child keeps its own copy of the descriptor
            workers.append(subprocess.Popen(cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 600
    for process in workers:
        process.wait(timeout=max(1.0, deadline - time.monotonic()))
    logs = [(tmp_path / f"worker{seed}.log").read_text() for seed in (1, 2)]
    for process, text in zip(workers, logs, strict=True):
        assert process.returncode == 0, text[-3000:]

    study = optuna.load_study(storage=postgres_url, study_name=study_name)
    trials = study.get_trials(deepcopy=False)
    numbers = sorted(t.number for t in trials)
    assert numbers == list(range(2 * n_trials)), numbers  # none lost, none duplicated
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    ran = [{int(n) for n in re.findall(r"Trial (\d+) (?:finished|pruned)", text)} for text in logs]
    assert all(len(r) == n_trials for r in ran), ran  # each worker ran its trials
    assert not (ran[0] & ran[1]) and ran[0] | ran[1] == set(numbers)  # both contributed, disjointly

    best = study.best_trial
    retrain_logs = tmp_path / "best"
    _zoo(
        "train", "--algo", "grpo", "--env", "CartPole-v1", "-conf", conf, "-f", retrain_logs, "-n", 200,
        "--storage", postgres_url, "--study-name", study_name, "--trial-id", best.number,
        "--env-kwargs", "max_episode_steps:200", *COMMON,
    )  # fmt: skip
    config = _saved_config(retrain_logs, "grpo", "CartPole-v1")
    for name, value in HYPERPARAMS_CONVERTER["grpo"](dict(best.params)).items():
        assert config[name] == value, name


@pytest.mark.parametrize(
    "args, environ, one_thread",
    [
        (["train", "--algo", "grpo", "--env", "CartPole-v1"], {}, True),
        (["enjoy", "--algo", "grpo", "--env", "CartPole-v1", "-f", "logs"], {}, True),
        (["train", "--algo", "ppo", "--env", "CartPole-v1", "--device", "cpu"], {}, True),
        (["train", "--algo", "grpo", "--env", "CartPole-v1", "--num-threads", "4"], {}, False),
        (["train", "--algo", "grpo", "--env", "CartPole-v1"], {"OMP_NUM_THREADS": "4"}, False),
        (["train", "--algo", "grpo", "--env", "CartPole-v1", "--device", "cuda"], {}, False),
        (["train", "--algo", "grpo", "--env", "PongNoFrameskip-v4", "-conf", "CNN"], {}, False),
        (["plot_train", "-a", "grpo", "-e", "CartPole-v1", "-f", "logs"], {}, False),
    ],
)
def test_train_and_enjoy_run_torch_on_one_thread_on_the_cpu_unless_told(tmp_path, monkeypatch, args, environ, one_thread):
    from sb3_grpo.zoo import cli

    cnn = tmp_path / "cnn.yml"
    cnn.write_text("PongNoFrameskip-v4:\n  policy: 'CnnPolicy'\n  n_timesteps: 1000\n")
    args = [str(cnn) if a == "CNN" else a for a in args]
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    seen = []
    monkeypatch.setattr(cli, "_load_command", lambda command: lambda: seen.append(list(sys.argv)))
    cli.main(args)
    assert (seen[0][-2:] == ["--num-threads", "1"]) == one_thread


def test_record_video_runs_with_our_algorithms(tmp_path):
    """rl_zoo3's record_video script, run through sb3-grpo-zoo, accepts --algo grpo and writes the video."""
    pytest.importorskip("moviepy")
    logs = tmp_path / "logs"
    _zoo("train", "--algo", "grpo", "--env", "CartPole-v1", "-f", logs, "--seed", 0, "-n", 300, *COMMON)
    _zoo("record_video", "--algo", "grpo", "--env", "CartPole-v1", "-f", logs, "-n", 30)
    assert list((logs / "grpo").glob("CartPole-v1_*/videos/*grpo-CartPole-v1*.mp4"))


@pytest.mark.parametrize("command", ["record_training", "push_to_hub"])
def test_the_other_rl_zoo_scripts_accept_our_algorithms(command, capsys):
    """Their argument parsers list our algorithms (``-h`` names grpo); where rl_zoo3's push_to_hub cannot import its
    Hugging Face helpers (a huggingface_sb3 release without them), the exit says so instead of a traceback."""
    with pytest.raises(SystemExit) as exit_info:
        _zoo(command, "-h")
    if exit_info.value.code == 0:
        assert "grpo" in capsys.readouterr().out
    else:
        assert command == "push_to_hub" and "huggingface_sb3" in str(exit_info.value.code)


def test_plot_train_saves_a_png_without_a_display(tmp_path):
    """``--output FILE`` (ours) makes rl_zoo3's plot commands save their figures instead of ``plt.show()``."""
    pytest.importorskip("seaborn")
    logs = tmp_path / "logs"
    _zoo("train", "--algo", "grpo", "--env", "CartPole-v1", "-f", logs, "--seed", 0, "-n", 2000, *COMMON)
    out = tmp_path / "plots" / "train.png"
    _zoo("plot_train", "-a", "grpo", "-e", "CartPole-v1", "-f", logs, "-w", 2, "--output", out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_params_reads_a_bare_word_as_a_string_and_names_a_value_it_cannot_read(capsys):
    import argparse

    from rl_zoo3.utils import StoreDict

    register()
    parser = argparse.ArgumentParser()
    parser.add_argument("-params", nargs="+", action=StoreDict)
    args = ["advantage_estimator:group_zscore", "beta:0.04", "name:'text'", "sizes:[64, 64]", "interval:None", "pairs:all"]
    args += ["policy_kwargs:dict(activation_fn=nn.ReLU)", "lr:lin_1e-3"]
    assert parser.parse_args(["-params", *args]).params == {
        "policy_kwargs": {"activation_fn": th.nn.ReLU},  # evaluated where rl_zoo3 evaluates it (nn is torch.nn)
        "lr": "lin_1e-3",
        "pairs": "all",  # not Python's builtin all()
        "advantage_estimator": "group_zscore",
        "beta": 0.04,
        "name": "text",
        "sizes": [64, 64],
        "interval": None,
    }
    with pytest.raises(SystemExit):
        parser.parse_args(["-params", "sizes:[64,"])
    assert "-params sizes:[64,: cannot read '[64,' as a Python value" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["-params", "advantage_kwargs:dict(scale=batch)"])
    assert "cannot read 'dict(scale=batch)' as a Python value (name 'batch' is not defined)" in capsys.readouterr().err


@pytest.mark.parametrize("env, says", [("Walker2d-v5", True), ("CartPole-v1", False)])
def test_train_says_when_an_env_falls_back_to_the_default_entry(monkeypatch, capsys, env, says):
    from sb3_grpo.zoo import cli

    monkeypatch.setattr(cli, "_load_command", lambda command: lambda: None)
    cli.main(["train", "--algo", "reinforce", "--env", env, "--num-threads", "1"])
    err = capsys.readouterr().err
    assert ("has no entry for Walker2d-v5: training with its untuned 'default' entry" in err) == says
    if says:
        measured = err.split("Measured entries of reinforce: ")[1].split(".")[0]
        assert "CartPole-v1" in measured and "default" not in measured
