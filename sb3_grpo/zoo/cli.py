"""
``sb3-grpo-zoo``: rl_zoo3's command line with sb3_grpo's algorithms registered.

::

    sb3-grpo-zoo train --algo grpo --env CartPole-v1            # any rl_zoo3 train flag: -n, -f, -params, --seed, ...
    sb3-grpo-zoo enjoy --algo grpo --env CartPole-v1 -f logs/   # any rl_zoo3 enjoy flag
    sb3-grpo-zoo train --algo adaptive_kl_ppo --env Pendulum-v1 -optimize --n-trials 50 --sampler tpe \\
        --storage sqlite:///tune.db --study-name akl-pendulum
    sb3-grpo-zoo train --algo ppo --env CartPole-v1             # SB3 / sb3-contrib algorithms work as in rl_zoo3

For ``train`` with one of our algorithms and no ``-conf``, the default config ``zoo_configs/{algo}.yml`` (shipped
in the package) is passed to rl_zoo3 as ``-conf``. ``train`` and ``enjoy`` run torch on one thread when they run on
the CPU with an MLP policy, unless ``--num-threads`` (or ``OMP_NUM_THREADS``) says otherwise: the small networks of
these configs spend more time synchronising torch's threads than computing, and one thread is several times faster
(rl_zoo3 itself leaves torch's default, one thread per core). ``plot_train``, ``plot_from_file`` and ``all_plots`` are passed
through to rl_zoo3 unchanged, with one flag of ours: ``--output FILE`` saves the figures to ``FILE`` instead of
showing them (no display needed); ``record_video``, ``record_training`` and ``push_to_hub`` (rl_zoo3's scripts, ``python
-m rl_zoo3.record_video`` ...) run with our algorithms registered (``record_training`` records each checkpoint through
``sb3-grpo-zoo record_video``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sb3_grpo.zoo.registry import ALGO_PATHS, UNAVAILABLE, default_config_path, register

__all__ = ["main"]

COMMANDS = (
    "train",
    "enjoy",
    "plot_train",
    "plot_from_file",
    "all_plots",
    "record_video",
    "record_training",
    "push_to_hub",
)
#: rl_zoo3's plot commands, which end in ``plt.show()``: ``--output FILE`` saves the figures instead (headless).
PLOT_COMMANDS = ("plot_train", "plot_from_file", "all_plots")
#: rl_zoo3's commands that are scripts (``python -m rl_zoo3.<name>``), not functions of ``rl_zoo3.cli``.
SCRIPT_COMMANDS = ("record_video", "record_training", "push_to_hub")

USAGE = f"""usage: sb3-grpo-zoo {{{",".join(COMMANDS)}}} [rl_zoo3 options]

rl_zoo3's command line with sb3_grpo's algorithms ({", ".join(ALGO_PATHS)}) registered.
`sb3-grpo-zoo train -h` lists the training options (all of rl_zoo3's)."""


def _option_value(args: Sequence[str], *names: str) -> str | None:
    """The value of the last ``--name value`` / ``--name=value`` among ``args`` (``None`` if absent)."""
    value = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg[len(name) + 1 :]
    return value


def _has_conf(args: Sequence[str]) -> bool:
    # -conf / --conf-file and the prefixes argparse accepts for them (-c, -co, -con; --conf, --conf-f, ...)
    for arg in args:
        name = arg.split("=", 1)[0]
        if (len(name) >= 2 and "-conf".startswith(name) and name != "-") or (name.startswith("--conf")):
            return True
    return False


def _without_option(args: Sequence[str], name: str) -> list[str]:
    """``args`` without ``name value`` / ``name=value``."""
    kept: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg == name:
            skip = i + 1 < len(args)
        elif not arg.startswith(name + "="):
            kept.append(arg)
    return kept


def _save_figures_instead_of_showing(output: str) -> None:
    """Draw without a display and make ``plt.show()`` save every open figure: ``output`` for the first one,
    ``<stem>_2<suffix>``, ... for the others."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    target = Path(output)

    def show(*args: Any, **kwargs: Any) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        for i, number in enumerate(plt.get_fignums()):
            path = target if i == 0 else target.with_name(f"{target.stem}_{i + 1}{target.suffix}")
            plt.figure(number).savefig(path, bbox_inches="tight")
            print(f"sb3-grpo-zoo: saved {path}", file=sys.stderr)
        plt.close("all")

    plt.show = show  # type: ignore[assignment]


def _cnn_policy(config: str | None, env_id: str | None) -> bool:
    """Whether the config's entry for ``env_id`` (else its ``default``) names a CNN policy (``False`` when unknown)."""
    if config is None or env_id is None:
        return False
    try:
        import yaml

        table = yaml.safe_load(Path(config).read_text()) or {}
        entry = table.get(env_id) or table.get("default") or {}
        return "cnn" in str(entry.get("policy", "")).lower()
    except Exception:  # a config rl_zoo3 reads but safe_load does not: rl_zoo3 will say what is wrong with it
        return False


def _fallback_notice(config: Path, algo: str, env_id: str | None) -> str | None:
    """What to tell a user whose env has no entry in our default config ``config`` (rl_zoo3 then trains with its
    ``default`` entry, saying only "Using 'default' hyperparameters"); ``None`` when the env has one."""
    if env_id is None:
        return None
    try:
        import yaml

        table = yaml.safe_load(config.read_text()) or {}
    except Exception:  # rl_zoo3 will say what is wrong with the file
        return None
    if env_id in table or "default" not in table:  # no default: rl_zoo3's own "Hyperparameters not found" error
        return None
    measured = ", ".join(name for name in table if name != "default")
    return (
        f"sb3-grpo-zoo: {config.name} has no entry for {env_id}: training with its untuned 'default' entry. "
        f"Measured entries of {algo}: {measured}. Pass your own with -conf FILE, or change settings with -params."
    )


def _one_thread(command: str, args: Sequence[str]) -> bool:
    """Whether to run torch on one thread: ``train`` / ``enjoy`` on the CPU with an MLP policy, no thread count given
    (``--num-threads``, ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS``)."""
    if command not in ("train", "enjoy") or _option_value(args, "--num-threads") is not None:
        return False
    if os.environ.get("OMP_NUM_THREADS") or os.environ.get("MKL_NUM_THREADS"):
        return False
    device = (_option_value(args, "--device") or "auto").lower()
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if not device.startswith("cpu"):
        return False
    return not _cnn_policy(_option_value(args, "-conf", "-c", "--conf-file"), _option_value(args, "--env"))


def _stub_hub_download_if_needed() -> None:
    """Let rl_zoo3's ``enjoy`` import without ``requests``.

    ``rl_zoo3.load_from_hub`` (imported by ``rl_zoo3.enjoy`` only to download pretrained agents from the Hugging Face
    hub) imports ``requests``, which recent ``huggingface_hub`` releases no longer install. Enjoying a locally trained
    agent does not need it, so without ``requests`` the module is replaced by one whose download raises a clear error.
    """
    try:
        import rl_zoo3.load_from_hub  # noqa: F401
    except ImportError as exc:
        import types

        reason = str(exc)

        def download_from_hub(*args: object, **kwargs: object) -> None:
            raise ImportError(f"Downloading agents from the Hugging Face hub needs `pip install requests` ({reason}).")

        stub = types.ModuleType("rl_zoo3.load_from_hub")
        stub.download_from_hub = download_from_hub  # type: ignore[attr-defined]
        sys.modules["rl_zoo3.load_from_hub"] = stub


def _run_script(command: str) -> None:
    """Run rl_zoo3's script ``rl_zoo3.<command>`` as ``__main__`` in this process, where our algorithms are registered.

    ``record_training`` records each checkpoint by running ``python -m rl_zoo3.record_video`` in a subprocess, which
    would not know our algorithms: those calls run ``python -m sb3_grpo.zoo record_video`` instead.
    """
    import runpy
    import subprocess

    original = subprocess.call

    def call(args: Any, *rest: Any, **kwargs: Any) -> int:
        if isinstance(args, list) and args[1:3] == ["-m", "rl_zoo3.record_video"]:
            args = [sys.executable, "-m", "sb3_grpo.zoo", "record_video", *args[3:]]
        return original(args, *rest, **kwargs)

    subprocess.call = call  # type: ignore[assignment]
    try:
        runpy.run_module(f"rl_zoo3.{command}", run_name="__main__", alter_sys=True)
    except ImportError as exc:
        sys.exit(
            f"sb3-grpo-zoo {command}: rl_zoo3's {command} script could not import what it needs ({exc}). "
            + (
                "It uses the huggingface_sb3 package: install the release this rl_zoo3 was made with "
                "(pip install huggingface_sb3, or an older release if this one lacks the name above)."
                if command == "push_to_hub"
                else "Install the missing package."
            )
        )
    finally:
        subprocess.call = original  # type: ignore[assignment]


def _load_command(command: str) -> Callable[[], None]:
    if command in SCRIPT_COMMANDS:
        if command == "record_video":
            _stub_hub_download_if_needed()
        return lambda: _run_script(command)
    if command == "train":
        from rl_zoo3.train import train

        return train
    if command == "enjoy":
        _stub_hub_download_if_needed()
        from rl_zoo3.enjoy import enjoy

        return enjoy
    _skip_broken_rliable()
    import rl_zoo3.plots as plots

    return getattr(plots, command)


def _skip_broken_rliable() -> None:
    """Let rl_zoo3's plots import when ``rliable`` is installed but cannot import (its ``arch`` dependency fails on
    pandas 3 with a TypeError): rl_zoo3 treats a missing rliable as optional, so it is made to look missing."""
    if "rliable" in sys.modules:
        return
    try:
        import rliable.library  # noqa: F401
    except ImportError:
        pass
    except Exception as exc:  # not an ImportError: rl_zoo3 would not catch it
        print(f"sb3-grpo-zoo: rliable does not import ({type(exc).__name__}: {exc}); plotting without it.", file=sys.stderr)
        for name in [m for m in sys.modules if m == "rliable" or m.startswith("rliable.")]:
            del sys.modules[name]
        sys.modules["rliable"] = None  # type: ignore[assignment]  # "import rliable" now raises ImportError


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``sb3-grpo-zoo`` / ``python -m sb3_grpo.zoo``; ``argv`` defaults to ``sys.argv[1:]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        sys.exit(f"sb3-grpo-zoo: unknown command {command!r}; choose one of {', '.join(COMMANDS)}\n\n{USAGE}")

    register()
    if command in ("train", "enjoy", *SCRIPT_COMMANDS):
        algo = _option_value(rest, "--algo")
        if algo in UNAVAILABLE:
            sys.exit(f"sb3-grpo-zoo: algorithm {algo!r} is not available in this installation ({UNAVAILABLE[algo]}).")
        if command == "train" and algo is not None and not _has_conf(rest):
            config = default_config_path(algo)
            if config is not None:
                rest = [*rest, "-conf", str(config)]
                notice = _fallback_notice(config, algo, _option_value(rest, "--env"))
                if notice is not None:
                    print(notice, file=sys.stderr)
            elif algo in ALGO_PATHS:
                sys.exit(
                    f"sb3-grpo-zoo: no default config {algo}.yml found (looked in $SB3_GRPO_ZOO_CONFIGS, the source "
                    "checkout's zoo_configs/ and the package's zoo/configs/); pass one with -conf FILE."
                )

    if _one_thread(command, rest):
        rest = [*rest, "--num-threads", "1"]
        print(
            "sb3-grpo-zoo: torch runs on one thread (small MLP policies train several times faster so on a CPU); "
            "pass --num-threads N to choose.",
            file=sys.stderr,
        )
    if command in PLOT_COMMANDS:
        output = _option_value(rest, "--output")
        if output is not None:
            rest = _without_option(rest, "--output")
            _save_figures_instead_of_showing(output)
    old_argv = sys.argv
    sys.argv = [f"sb3-grpo-zoo {command}", *rest]
    try:
        _load_command(command)()
    finally:
        sys.argv = old_argv


if __name__ == "__main__":
    main()
