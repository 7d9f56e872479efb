"""
Side-by-side benchmark harness: our algorithms against SB3 PPO and sb3-contrib TRPO on the same envs, seeds and
budgets, with the same evaluation.

One *cell* is (algorithm, env, seed, budget). Each cell trains in its own process with torch and numpy's BLAS
limited to one thread, evaluates every ``eval_freq`` env steps (deterministic actions, ``n_eval_episodes`` episodes,
on a separate env whose VecNormalize statistics are copied from the training env), and writes, in the working
directory ``--out`` (``benchmarks/work/``, ignored by git):

- ``<algo>__<env>__s<seed>__<budget>.csv``: the evaluation curve (timesteps, mean, std, train seconds, RSS);
- ``<algo>__<env>__s<seed>__<budget>.json``: the summary (final eval, fps, update time, peak memory, versions and
  kernels, date, the commit the cell started on, the hyperparameters of its entry and the constructor defaults the
  entry left to the algorithm), written last;
- with ``--save-models``, ``<algo>__<env>__s<seed>__<budget>.models/<steps>.zip``: the model at each evaluation
  (and ``<steps>.vecnormalize.pkl``, its observation statistics, where the entry normalises), for
  ``python -m benchmarks.eval_models`` to evaluate again.

Each finished cell is then added to the results table (``benchmarks/results/cells.csv.gz`` and ``curves.csv.gz``,
see ``benchmarks/table.py``), from which ``python -m benchmarks.aggregate`` rebuilds the tables and plots of
BENCHMARKS.md. A cell already in the table or finished in the working directory is never rerun.

Hyperparameters: SB3 PPO and sb3-contrib TRPO use rl-zoo's (rl_zoo3's ``hyperparams/*.yml``; the -v5 MuJoCo envs,
for which rl_zoo3 2.9.2 has no entry, use the -v4 entry); our algorithms use ``zoo_configs/<algo>.yml``,
``<algo>:default`` that file's ``default`` entry on any env, and ``<algo>:<tag>`` the sweep file
``benchmarks/sweeps/<algo>_<tag>.yml``, whose entry may name the configuration it changes (``base: grpo:<tag>``)
and write only the change, ``drop: [<key>, ...]`` for keys of the base it removes (``load_hyperparams``).

A sweep file may change the model partway through a cell, as a user would between two ``learn`` calls: the key
``switch: {at: <steps>, set: {<argument>: <value>, ...}}`` trains to ``at`` steps, saves the model, loads it with
``set`` as keyword arguments (``GRPO.load(path, env, branch_every=20, ...)``) and trains on to the budget with
``reset_num_timesteps=False``, the evaluations keeping their steps. As in SB3, the first ``learn`` runs its
schedules over ``at`` steps and the second over the whole budget (resuming at ``at / budget`` of their progress);
with ``schedules: budget`` in ``switch`` the first ``learn`` is ``learn(budget)`` stopped by a callback at ``at``
steps (the rollout in progress is dropped), so every schedule runs once over the whole budget: what
``sb3_grpo.SwitchArguments`` does within one ``learn`` call. A zoo entry whose rl-zoo ``callback`` is one
``sb3_grpo.SwitchArguments`` runs as that ``switch`` (``dataset.as_switch``).

    python -m benchmarks.harness --algos grpo ppo --envs CartPole-v1 Acrobot-v1 --seeds 0 1 2 --jobs 2
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import os
import re
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks import table
from benchmarks.dataset import as_switch

ROOT = Path(__file__).resolve().parents[1]
#: The working directory of the cells (ignored by git); finished cells go to the results table.
DEFAULT_OUT = ROOT / "benchmarks" / "work"

#: Score at which an env counts as solved, for steps-to-threshold: gymnasium's ``reward_threshold`` where it sets one
#: (a test checks they agree), but on Pendulum-v1 (none set) and the MuJoCo locomotion envs, lower than gymnasium's
#: 4800 / 3800 so that steps to threshold measure early learning: 1500 a gait on HalfCheetah, 1000 standing the whole
#: episode on Hopper and Walker2d.
THRESHOLDS = {
    "CartPole-v1": 475.0,
    "Acrobot-v1": -100.0,
    "MountainCar-v0": -110.0,
    "MountainCarContinuous-v0": 90.0,
    "Pendulum-v1": -200.0,
    "LunarLander-v3": 200.0,
    "HalfCheetah-v5": 1500.0,
    "Hopper-v5": 1000.0,
    "Walker2d-v5": 1000.0,
    "Swimmer-v5": 360.0,
    "Ant-v5": 6000.0,
    "BipedalWalker-v3": 300.0,
}
#: Default budgets (env steps) per env.
BUDGETS = {
    "CartPole-v1": 100_000,
    "Acrobot-v1": 200_000,
    "MountainCar-v0": 1_000_000,  # rl-zoo's PPO budget; its TRPO entry: 100k (pass --budget 100000)
    "MountainCarContinuous-v0": 20_000,  # rl-zoo's PPO budget; its TRPO entry: 50k (pass --budget 50000)
    "Pendulum-v1": 300_000,
    "LunarLander-v3": 500_000,
    "HalfCheetah-v5": 300_000,
    "Hopper-v5": 300_000,
    "Walker2d-v5": 1_000_000,
    "Swimmer-v5": 1_000_000,
    "Ant-v5": 1_000_000,
    "BipedalWalker-v3": 1_000_000,
}
OURS = ("grpo", "exact_trpo", "adaptive_kl_ppo", "reinforce", "online_dpo")
BASELINES = ("ppo", "trpo")
# The SB3 / sb3-contrib algorithm each of ours is compared with (a baseline is its own).
BASELINE_OF = {
    "grpo": "ppo",
    "adaptive_kl_ppo": "ppo",
    "exact_trpo": "trpo",
    "reinforce": "ppo",
    "online_dpo": "ppo",
    "ppo": "ppo",
    "trpo": "trpo",
}


def _zoo_file(algo: str) -> Path:
    if algo.endswith(":default"):  # "grpo:default": the `default` entry of zoo_configs/grpo.yml, on any env
        return ROOT / "zoo_configs" / f"{algo.split(':')[0]}.yml"
    if ":" in algo:  # a sweep variant "grpo:tag" reads benchmarks/sweeps/grpo_tag.yml
        base, tag = algo.split(":", 1)
        return ROOT / "benchmarks" / "sweeps" / f"{base}_{tag}.yml"
    if algo in OURS:
        return ROOT / "zoo_configs" / f"{algo}.yml"
    try:
        import rl_zoo3

        return Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml"
    except ImportError:  # the vendored copy (same content, rl_zoo3 2.9.2)
        return ROOT / "benchmarks" / "zoo_hyperparams" / f"{algo}.yml"


def _merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes``: a mapping in both is merged key by key (``switch: {set: {...}}`` changes one
    argument of the base's switch), any other value replaces the base's."""
    out = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def load_hyperparams(algo: str, env_id: str, _chain: tuple[str, ...] = ()) -> dict[str, Any]:
    """The rl-zoo style entry for ``env_id`` (falling back to -v4 for -v5 envs, then to ``default``).

    ``"<algo>:default"`` scores our zoo file's ``default`` entry (what rl-zoo uses on an env without its own entry)
    on any env, ignoring the env's own entry.

    A sweep file's entry may name the configuration it changes, ``base: grpo:<tag>`` (another sweep) or ``base:
    grpo`` (the zoo entry), and write only what it changes: the base's entry for the same env, resolved the same way,
    less the keys listed under ``drop`` (``drop: [log_std_max]``: the base's argument left at its default), with the
    sweep's keys merged in (see ``_merged``). What a cell records as its hyperparameters is the resolved entry.
    """
    path = _zoo_file(algo)
    table = yaml.safe_load(path.read_text()) if path.exists() else {}
    keys = ("default",) if algo.endswith(":default") else (env_id, env_id.replace("-v5", "-v4"), "default")
    for key in keys:
        if key in (table or {}):
            entry = dict(table[key])
            if "base" not in entry:
                if "drop" in entry:
                    raise ValueError(f"{path.name} ({key}): 'drop' removes keys of a base; name one with 'base'")
                return entry
            base = entry.pop("base")
            where = f"{path.name} ({key})"
            if path.parent != ROOT / "benchmarks" / "sweeps":
                raise ValueError(
                    f"{where}: 'base' is a key of sweep files only (rl_zoo3 reads zoo files too, and has no such "
                    f"key); write the entry whole"
                )
            name = algo.split(":")[0]
            if not isinstance(base, str) or base.split(":")[0] != name:
                raise ValueError(
                    f"{where}: base must name a configuration of the same algorithm, {name!r} (its zoo entry) or "
                    f"'{name}:<tag>' (a sweep), got {base!r}"
                )
            chain = (*_chain, algo)
            if base in chain:
                raise ValueError(f"{where}: base {base!r} leads back to itself ({' -> '.join((*chain, base))})")
            resolved = load_hyperparams(base, env_id, chain)
            drop = entry.pop("drop", [])
            if not isinstance(drop, list) or not all(isinstance(k, str) for k in drop):
                raise ValueError(f"{where}: drop must list keys of the base's entry, e.g. [log_std_max]; got {drop!r}")
            missing = [k for k in drop if k not in resolved]
            if missing:
                raise ValueError(
                    f"{where}: drop names {', '.join(missing)}, which {base}'s entry for {env_id} does not have "
                    f"(it has {', '.join(resolved)})"
                )
            return _merged({k: v for k, v in resolved.items() if k not in drop}, entry)
    raise KeyError(f"No hyperparameters for {algo} on {env_id} in {path}")


def _schedule(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress: progress * start
    if isinstance(value, str) and value.startswith("KLAdaptiveLR"):
        from sb3_grpo.zoo.registry import read_kl_adaptive_lr

        return read_kl_adaptive_lr(value)
    return value


def build(
    algo: str, env_id: str, seed: int, device: str = "cpu", overrides: dict[str, Any] | None = None
) -> tuple[Any, Any, dict[str, Any]]:
    """Model, eval env and the hyperparameters used: the zoo entry as written (schedules as ``lin_<x>`` strings),
    without ``n_timesteps``, with ``overrides`` (hyperparameters in the entry's format) replacing its values."""
    import torch.nn as nn
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    entry = as_switch(load_hyperparams(algo, env_id))  # a zoo entry's SwitchArguments callback: run_cell's switch
    entry.pop("n_timesteps", None)
    entry.update(overrides or {})
    hp = dict(entry)
    n_envs = int(hp.pop("n_envs", 1))
    policy = hp.pop("policy", "MlpPolicy")
    normalize = hp.pop("normalize", False)
    # rl-zoo's env_kwargs: gymnasium.make kwargs of the *training* envs (e.g. max_episode_steps, a longer training time
    # limit). As in rl-zoo when they come from the config file, the evaluation env is the env's own registration.
    env_kwargs = hp.pop("env_kwargs", None)
    hp.pop("switch", None)  # run_cell's: a change partway through the cell
    for key in ("frame_stack", "env_wrapper", "callback", "normalize_kwargs"):
        if key in hp:
            raise ValueError(f"benchmark harness does not handle {key!r} (in {algo}/{env_id})")
    if isinstance(hp.get("policy_kwargs"), str):
        hp["policy_kwargs"] = eval(hp["policy_kwargs"], {"nn": nn, "dict": dict})
    for key in ("learning_rate", "clip_range", "clip_range_high"):
        if key in hp:
            hp[key] = _schedule(hp[key])
    venv = make_vec_env(env_id, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs)
    eval_env = make_vec_env(env_id, n_envs=1, seed=seed + 10_000)
    if normalize:
        kwargs = normalize if isinstance(normalize, dict) else {}
        if isinstance(normalize, str):
            kwargs = eval(normalize)
        venv = VecNormalize(venv, gamma=hp.get("gamma", 0.99), **kwargs)
        eval_env = VecNormalize(
            eval_env, training=False, norm_reward=False, **{k: v for k, v in kwargs.items() if k != "norm_reward"}
        )
    cls = algorithm_class(algo)
    model = cls(policy, venv, seed=seed, device=device, verbose=0, **hp)
    return model, eval_env, entry


#: Constructor arguments that are not hyperparameters of a run: the harness sets them, or they do not change learning.
NOT_HYPERPARAMETERS = frozenset({"self", "policy", "env", "seed", "device", "verbose", "tensorboard_log", "_init_setup_model"})


def _json_safe(value: Any) -> Any:
    """``value`` if JSON writes it as itself, else its ``repr`` without memory addresses."""
    try:
        if json.loads(json.dumps(value)) == value:
            return value
    except (TypeError, ValueError):
        pass
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def constructor_defaults(cls: type, entry: dict[str, Any]) -> dict[str, Any]:
    """The arguments of ``cls``'s constructor that ``entry`` leaves out, with their defaults: what the entry ran with
    besides what it names. Recorded with each cell, since a default can change after a cell ran and move the entry's
    results unseen (as GRPO's ``advantage_estimator`` default did for its Acrobot-v1 entry)."""
    return {
        name: _json_safe(parameter.default)
        for name, parameter in inspect.signature(cls.__init__).parameters.items()
        if name not in NOT_HYPERPARAMETERS and name not in entry and parameter.default is not inspect.Parameter.empty
    }


def changed_defaults(row: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """For a results-table row that recorded its defaults: ``{argument: (default then, default now)}`` for each
    default of its algorithm's constructor that differs from the one the cell ran with (``{}`` when none)."""
    then = json.loads(row["defaults"])
    now = constructor_defaults(algorithm_class(row["algo"]), json.loads(row["hyperparams"]))
    return {name: (then.get(name), now.get(name)) for name in sorted(set(then) | set(now)) if then.get(name) != now.get(name)}


def algorithm_class(algo: str) -> type:
    if algo == "ppo":
        from stable_baselines3 import PPO

        return PPO
    if algo == "trpo":
        from sb3_contrib import TRPO

        return TRPO
    from sb3_grpo.zoo.registry import ALGO_PATHS

    module, _, name = ALGO_PATHS[algo.split(":")[0]].partition(":")
    return getattr(importlib.import_module(module), name)


def cell_name(algo: str, env_id: str, seed: int, budget: int) -> str:
    return f"{algo.replace(':', '-')}__{env_id}__s{seed}__{budget}"


def parse_cell_name(name: str) -> tuple[str, str, int, int]:
    """The inverse of :func:`cell_name`: ``(algo, env_id, seed, budget)``, the algorithm as ``algo`` or
    ``algo:tag``; ``ValueError`` for a name :func:`cell_name` does not make."""
    parts = name.split("__")
    if len(parts) != 4 or not parts[2].startswith("s") or not parts[2][1:].isdigit() or not parts[3].isdigit():
        raise ValueError(f"{name!r} is not a cell's name (<algo>__<env>__s<seed>__<budget>)")
    algo, _, tag = parts[0].partition("-")
    return (f"{algo}:{tag}" if tag else algo), parts[1], int(parts[2][1:]), int(parts[3])


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def every_n_steps(freq: int, fn: Any) -> Any:
    """A callback that calls ``fn()`` each time training passes another multiple of ``freq`` env steps, counted from
    the model's steps when ``learn`` starts (a model loaded at 500k steps is next called at the multiple above it)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class EveryNSteps(BaseCallback):
        def _init_callback(self) -> None:
            self.next_call = (self.model.num_timesteps // freq + 1) * freq

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_call:
                fn()
                self.next_call += freq
            return True

    return EveryNSteps()


def stop_at(steps: int) -> Any:
    """A callback that stops training once ``steps`` env steps have been taken."""
    from stable_baselines3.common.callbacks import BaseCallback

    class StopAt(BaseCallback):
        def _on_step(self) -> bool:
            return self.num_timesteps < steps

    return StopAt()


def evaluate_model(model: Any, eval_env: Any, n_eval_episodes: int) -> tuple[float, float]:
    """Mean and std of the return of ``n_eval_episodes`` deterministic episodes on ``eval_env``, whose VecNormalize
    observation statistics (if any) are first copied from the model's training env."""
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    train_env = model.get_env()
    if isinstance(eval_env, VecNormalize) and isinstance(train_env, VecNormalize):
        eval_env.obs_rms = train_env.obs_rms.copy()
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=n_eval_episodes, deterministic=True)
    return float(mean), float(std)


def one_thread() -> None:
    """Run torch and numpy's BLAS on one thread in this process: runs go side by side, and how OpenBLAS splits a fit
    over threads moves its last bits (``versions()["kernels"]`` records the kernels and threads)."""
    import torch as th
    from threadpoolctl import threadpool_limits

    th.set_num_threads(1)
    threadpool_limits(1, user_api="blas")


def run_cell(
    algo: str,
    env_id: str,
    seed: int,
    budget: int,
    out: str,
    eval_freq: int,
    n_eval_episodes: int,
    device: str = "cpu",
    save_models: bool = False,
) -> dict[str, Any]:
    """Train and evaluate one cell; returns (and writes) its summary. ``save_models``: also save the model at each
    evaluation, in ``<cell>.models/`` of ``out``."""
    one_thread()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = cell_name(algo, env_id, seed, budget)
    summary_path = out_dir / f"{name}.json"
    if summary_path.exists():
        return json.loads(summary_path.read_text())
    csv_path = out_dir / f"{name}.csv"
    started_on = commit()  # the working tree may change while the cell trains
    model, eval_env, used = build(algo, env_id, seed, device)
    defaults = constructor_defaults(type(model), used)
    update_times: list[float] = []

    def time_updates(model: Any) -> None:
        original_train = model.train

        def timed_train() -> None:
            start = time.perf_counter()
            original_train()
            update_times.append(time.perf_counter() - start)

        model.train = timed_train  # type: ignore[method-assign]

    time_updates(model)
    rows: list[tuple] = []
    eval_seconds = [0.0]
    start_rss = rss_mb()

    def evaluate() -> None:
        t0 = time.perf_counter()
        if save_models:
            save_model(model, out_dir / f"{name}.models")
        mean, std = evaluate_model(model, eval_env, n_eval_episodes)
        eval_seconds[0] += time.perf_counter() - t0
        train_seconds = time.perf_counter() - t_start - eval_seconds[0]
        rows.append((model.num_timesteps, mean, std, train_seconds, rss_mb()))
        with open(csv_path, "w") as f:
            f.write("timesteps,eval_mean,eval_std,train_seconds,rss_mb\n")
            for row in rows:
                f.write(",".join(str(x) for x in row) + "\n")

    t_start = time.perf_counter()
    callback = every_n_steps(eval_freq, evaluate)
    switch = used.get("switch")
    if switch:
        model = switch_model(model, switch, budget, callback, out_dir / f"{name}.switch.zip")
        time_updates(model)
    model.learn(budget - model.num_timesteps, callback=callback, reset_num_timesteps=model.num_timesteps == 0)
    evaluate()
    train_seconds = rows[-1][3]
    threshold = THRESHOLDS.get(env_id)
    reached = [r[0] for r in rows if threshold is not None and r[1] >= threshold]
    summary = {
        "algo": algo,
        "env": env_id,
        "seed": seed,
        "budget": budget,
        "final_eval": rows[-1][1],
        "best_eval": max(r[1] for r in rows),
        "steps_to_threshold": reached[0] if reached else None,
        "seconds_to_threshold": next((r[3] for r in rows if r[0] == reached[0]), None) if reached else None,
        "train_seconds": train_seconds,
        "fps": model.num_timesteps / max(train_seconds, 1e-9),
        "update_ms": 1000 * float(np.mean(update_times)) if update_times else None,
        "n_updates": len(update_times),
        "rss_start_mb": start_rss,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "used_step_fraction": getattr(model.rollout_buffer, "stats", {}).get("rollout/used_step_fraction"),
        "hyperparams": used,
        "defaults": defaults,
        "versions": versions(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commit": started_on,
    }
    summary_path.write_text(json.dumps(summary, indent=1))
    return summary


def save_model(model: Any, directory: Path) -> None:
    """Save ``model`` as ``<num_timesteps>.zip`` in ``directory``, with its VecNormalize statistics (if any) as
    ``<num_timesteps>.vecnormalize.pkl``."""
    from stable_baselines3.common.vec_env import VecNormalize

    directory.mkdir(parents=True, exist_ok=True)
    model.save(directory / f"{model.num_timesteps}.zip", exclude=["train"])  # not run_cell's update timer
    env = model.get_env()
    if isinstance(env, VecNormalize):
        env.save(str(directory / f"{model.num_timesteps}.vecnormalize.pkl"))


def check_switch(switch: dict[str, Any], budget: int) -> tuple[int, str]:
    """The sweep key ``switch`` of the module docstring checked against ``budget``: its ``at`` and ``schedules``."""
    unknown = sorted(set(switch) - {"at", "set", "schedules"})
    schedules = switch.get("schedules", "at")
    if unknown or "at" not in switch or not 0 < int(switch["at"]) < budget or schedules not in ("at", "budget"):
        what = "no at" if "at" not in switch else f"unknown {', '.join(unknown)}" if unknown else "at or schedules"
        raise ValueError(
            f"switch must be {{at: <steps below the budget {budget}>, set: {{...}}, schedules: at | budget}} "
            f"(schedules optional), got {switch!r} ({what})"
        )
    return int(switch["at"]), schedules


def switch_model(model: Any, switch: dict[str, Any], budget: int, callback: Any, path: Path) -> Any:
    """Train ``model`` to ``switch["at"]`` steps, save it and load it back with ``switch["set"]`` as keyword
    arguments (on the same env); returns the loaded model. The sweep key ``switch`` of the module docstring."""
    at, schedules = check_switch(switch, budget)
    if schedules == "budget":
        from stable_baselines3.common.callbacks import CallbackList

        model.learn(budget, callback=CallbackList([callback, stop_at(at)]))
    else:
        model.learn(at, callback=callback)
    # run_cell times the updates by wrapping the instance's ``train``; saved with the model, the wrapper would come
    # back bound to a pickled copy of this model, and the loaded model would train that copy instead of itself
    model.save(path, exclude=["train"])
    loaded = type(model).load(path, env=model.get_env(), device=model.device, **dict(switch.get("set") or {}))
    path.unlink()
    return loaded


def run_experiment_cells(
    description: str, algo: str, seeds: list[int], argv: list[str] | None = None, env_id: str = "HalfCheetah-v5"
) -> None:
    """Command line of the ``exp_*`` scripts: run their cells in this process (after they registered their plugins),
    one seed after another, evaluated as in ``run_all.sh`` (every 20k steps, 5 episodes)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default=algo)
    parser.add_argument("--env", default=env_id)
    parser.add_argument("--seeds", type=int, nargs="+", default=seeds)
    parser.add_argument("--budget", type=int, default=300_000)
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="working directory of the cells")
    parser.add_argument("--results", default=str(table.RESULTS), help="where cells.csv.gz and curves.csv.gz are")
    args = parser.parse_args(argv)
    for seed in args.seeds:
        summary = run_cell(args.algo, args.env, seed, args.budget, args.out, 20_000, 5)
        add_to_table(summary, Path(args.out), Path(args.results))
        print(f"{args.algo} {args.env} seed {seed}: final {summary['final_eval']:.1f}")


def add_to_table(summary: dict[str, Any], out: Path, results: Path) -> None:
    """Add a finished cell (its summary and the curve file in the working directory ``out``) to the results table."""
    name = cell_name(summary["algo"], summary["env"], summary["seed"], summary["budget"])
    table.add([(summary, out / f"{name}.csv")], results / table.CELLS.name, results / table.CURVES.name)


def in_table(results: Path) -> set[str]:
    """The cell names already in the results table."""
    return {
        cell_name(table.cell_label(r), r["env"], r["seed"], r["budget"]) for r in table.read_cells(results / table.CELLS.name)
    }


def commit() -> str:
    """The commit the working tree is on (``+dirty`` when it has uncommitted changes), or ``""`` outside git."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")


def versions() -> dict[str, str]:
    """What a cell ran on. Cells are bit-reproducible on one machine, not across machines: the same code and recorded
    versions gave other Hopper-v5 trajectories on another machine, so the CPU, the numerical libraries on the
    simulation path and the kernels they chose for this CPU (:func:`_kernels`) are recorded too."""
    import importlib.metadata
    import platform

    import gymnasium
    import sb3_contrib
    import stable_baselines3
    import torch

    found = {}
    for package in ("numpy", "mujoco", "box2d"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[package] = importlib.metadata.version(package)
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "stable_baselines3": stable_baselines3.__version__,
        "sb3_contrib": sb3_contrib.__version__,
        "gymnasium": gymnasium.__version__,
        **found,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "cpu": _cpu_model(),
        "kernels": _kernels(),
    }


def _cpu_model() -> str:
    """The CPU's model name and widest vector extension (from /proc/cpuinfo on Linux; else platform's guess)."""
    import platform

    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "unknown")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    widest = next((f for f in ("avx512f", "avx2", "avx", "sse4_2") if f in flags), "")
    return f"{name} ({widest})" if widest else name


def _kernels() -> str:
    """The kernels the numerical libraries chose for this CPU at run time: OpenBLAS's core type and threads (numpy's
    linear algebra; ``OPENBLAS_CORETYPE`` and ``OPENBLAS_NUM_THREADS`` set them) and torch's vector width
    (``ATEN_CPU_CAPABILITY`` sets it). Two machines with the same versions and CPU flags can choose differently, and
    the choice moves the last bits of a least-squares fit, enough for a run to part from its repeat (BENCHMARKS,
    "MuJoCo at 1M steps")."""
    import torch
    from threadpoolctl import threadpool_info

    blas = [
        f"{info['internal_api']} {info.get('architecture') or '?'}, {info['num_threads']} thread"
        + ("s" if info["num_threads"] != 1 else "")
        for info in threadpool_info()
        if info.get("user_api") == "blas"
    ]
    return "; ".join([*blas, f"torch {torch.backends.cpu.get_cpu_capability()}"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["grpo", "ppo"])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=None, help="env steps per cell (default: per-env BUDGETS)")
    parser.add_argument("--eval-freq", type=int, default=10_000)
    parser.add_argument("--n-eval-episodes", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=1, help="cells run in parallel (one thread each)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="working directory of the cells (ignored by git)")
    parser.add_argument("--results", default=str(table.RESULTS), help="where cells.csv.gz and curves.csv.gz are")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--save-models", action="store_true", help="save the model at each evaluation (for benchmarks.eval_models)"
    )
    args = parser.parse_args(argv)
    out, results = Path(args.out), Path(args.results)
    cells = [
        (algo, env, seed, args.budget or BUDGETS.get(env, 100_000))
        for env in args.envs
        for seed in args.seeds
        for algo in args.algos
    ]
    done = in_table(results)
    for c in cells:  # finished in the working directory but not yet in the table (an interrupted run)
        summary_path = out / f"{cell_name(*c)}.json"
        if cell_name(*c) not in done and summary_path.exists():
            add_to_table(json.loads(summary_path.read_text()), out, results)
            done.add(cell_name(*c))
    todo = [c for c in cells if cell_name(*c) not in done]
    print(f"{len(cells)} cells, {len(cells) - len(todo)} already finished, {len(todo)} to run", flush=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            pool.submit(run_cell, *cell, args.out, args.eval_freq, args.n_eval_episodes, args.device, args.save_models): cell
            for cell in todo
        }
        for future in as_completed(futures):
            cell = futures[future]
            try:
                s = future.result()
                add_to_table(s, out, results)
                print(
                    f"{cell_name(*cell)}: final {s['final_eval']:.1f} best {s['best_eval']:.1f} "
                    f"fps {s['fps']:.0f} update {s['update_ms'] or 0:.1f} ms",
                    flush=True,
                )
            except Exception as exc:  # keep the other cells running
                print(f"{cell_name(*cell)}: FAILED {exc!r}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
