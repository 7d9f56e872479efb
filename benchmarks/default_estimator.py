"""
Which advantage estimator GRPO should use by default: the candidates on the envs SB3 users bring.

Tasks (every run: one thread, the GRPO defaults unless the task says otherwise):

- ``identity_*`` (SB3's ``tests/test_identity.py``, its four envs with 4 actions per dimension, 100 steps per episode,
  reward 1 per step where the action matches the observation; ``IdentityEnvBox(eps=0.5)``: within 0.5): SB3's test
  with the settings and budget it gives PPO (discrete: ``gamma=0.4, learning_rate=0.002, n_steps=256, n_epochs=4``,
  1,200 steps; Box: ``learning_rate=1e-3, n_steps=256, n_epochs=4``, 1,000 steps; GRPO runs whole groups, so 1,600
  and 800 at least). Pass: mean reward of 20 deterministic episodes >= 90, as the test requires. SB3's envs do not
  seed what they sample from the reset seed, so these runs use ``verify_group_starts=False``.
- ``identity_*_defaults``: the same envs, ``GRPO("MlpPolicy", env, verify_group_starts=False).learn(20_000)``.
- ``cartpole``: ``GRPO("MlpPolicy", "CartPole-v1").learn()`` (100,000 steps); mean of 20 deterministic episodes.
- ``pendulum``: ``GRPO("MlpPolicy", "Pendulum-v1").learn()`` (100,000 steps); mean of 20 deterministic episodes.
- ``arithmetic``: ``sb3_grpo/Arithmetic-v0`` with the outcome reward ``arithmetic_exact_match`` alone (0 on every
  step but the score of the whole answer) and ``benchmarks/bench_arithmetic.py``'s ``grpo_exact`` settings (8 envs,
  ReLU, lr 1e-3, batch 256, ``ent_coef=0.03``), 100,000 steps; exact-match accuracy of greedy answers on 500 fresh
  questions.
- ``arithmetic_defaults``: ``GRPO("MlpPolicy", "sb3_grpo/Arithmetic-v0",
  reward_functions=[arithmetic_exact_match]).learn()``; the same accuracy.
- ``arithmetic_shaped``: ``bench_arithmetic.py``'s ``grpo_shaped`` (and ``examples/arithmetic_grpo.py``): the
  settings of ``arithmetic`` with the outcome ``arithmetic_exact_match + arithmetic_format +
  arithmetic_length_penalty``, 200,000 steps; the same accuracy.

Run (one run at a time, results appended to the JSON file as they come, so an interrupted run resumes)::

    python -m benchmarks.default_estimator [--tasks cartpole pendulum]
        [--estimators group_zscore group_step_baseline group_auto] [--seeds 0 1 2]
        [--out benchmarks/results/default_estimator.json]

``--table-only`` prints the table of what the JSON file holds.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv

import sb3_grpo.envs  # noqa: F401  (registers sb3_grpo/Arithmetic-v0)
from sb3_grpo import GRPO
from sb3_grpo.envs.arithmetic import exact_match_accuracy
from sb3_grpo.envs.arithmetic_rewards import arithmetic_exact_match, arithmetic_format, arithmetic_length_penalty

ESTIMATORS = ("group_zscore", "group_step_baseline", "group_auto", "group_process")
DEFAULT_ESTIMATORS = ("group_zscore", "group_step_baseline", "group_auto")
IDENTITY_ENVS: dict[str, Callable[[], gym.Env]] = {
    "discrete": lambda: IdentityEnv(4),
    "multidiscrete": lambda: IdentityEnvMultiDiscrete(4),
    "multibinary": lambda: IdentityEnvMultiBinary(4),
    "box": lambda: IdentityEnvBox(eps=0.5),
}
#: SB3's test: the settings and budget it gives PPO
SB3_IDENTITY = {
    "discrete": (dict(gamma=0.4, learning_rate=0.002, n_steps=256, n_epochs=4), 1_200),
    "box": (dict(learning_rate=1e-3, n_steps=256, n_epochs=4), 1_000),
}
ARITHMETIC_SETTINGS = dict(
    learning_rate=1e-3,
    n_steps=64,
    batch_size=256,
    n_epochs=10,
    ent_coef=0.03,
    group_size=8,
    policy_kwargs=dict(activation_fn=th.nn.ReLU),
)
#: what each task's score means, and the score that counts as solved (None: compare only)
SCORES = {
    "identity": ("mean reward (max 100)", 90.0),
    "cartpole": ("mean return (max 500)", 475.0),
    "pendulum": ("mean return (0 best)", None),
    "arithmetic": ("exact-match accuracy", None),
}


def _identity(kind: str, estimator: str, seed: int, defaults: bool) -> tuple[float, int]:
    env = IDENTITY_ENVS[kind]()
    venv = DummyVecEnv([lambda: env])
    if defaults:
        kwargs: dict[str, Any] = {}
        steps = 20_000
    else:
        kwargs, steps = SB3_IDENTITY["box" if kind == "box" else "discrete"]
    model = GRPO(
        "MlpPolicy", venv, advantage_estimator=estimator, verify_group_starts=False, seed=seed, device="cpu", **kwargs
    )
    model.learn(steps)
    mean, _ = evaluate_policy(model, venv, n_eval_episodes=20, warn=False)  # as SB3's test: on the training env
    return float(mean), model.num_timesteps


def _control(env_id: str, estimator: str, seed: int) -> tuple[float, int]:
    model = GRPO("MlpPolicy", env_id, advantage_estimator=estimator, seed=seed, device="cpu").learn()
    eval_env = gym.make(env_id)
    eval_env.reset(seed=10_000 + seed)
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=20, warn=False)
    return float(mean), model.num_timesteps


def _arithmetic(estimator: str, seed: int, defaults: bool, shaped: bool = False) -> tuple[float, int]:
    if defaults:
        model = GRPO(
            "MlpPolicy",
            "sb3_grpo/Arithmetic-v0",
            reward_functions=[arithmetic_exact_match],
            advantage_estimator=estimator,
            seed=seed,
            device="cpu",
        ).learn()
    else:
        env = make_vec_env("sb3_grpo/Arithmetic-v0", n_envs=8, seed=seed)
        shaping = [arithmetic_format, arithmetic_length_penalty] if shaped else []
        model = GRPO(
            "MlpPolicy",
            env,
            reward_functions=[arithmetic_exact_match, *shaping],
            advantage_estimator=estimator,
            seed=seed,
            device="cpu",
            **ARITHMETIC_SETTINGS,  # type: ignore[arg-type]
        ).learn(200_000 if shaped else 100_000)
    return exact_match_accuracy(model, n_episodes=500, seed=1_000_000 + seed), model.num_timesteps


TASKS: dict[str, Callable[[str, int], tuple[float, int]]] = {
    **{f"identity_{k}": (lambda e, s, k=k: _identity(k, e, s, defaults=False)) for k in IDENTITY_ENVS},
    **{f"identity_{k}_defaults": (lambda e, s, k=k: _identity(k, e, s, defaults=True)) for k in IDENTITY_ENVS},
    "cartpole": lambda e, s: _control("CartPole-v1", e, s),
    "pendulum": lambda e, s: _control("Pendulum-v1", e, s),
    "arithmetic": lambda e, s: _arithmetic(e, s, defaults=False),
    "arithmetic_defaults": lambda e, s: _arithmetic(e, s, defaults=True),
    "arithmetic_shaped": lambda e, s: _arithmetic(e, s, defaults=False, shaped=True),
}


def score_kind(task: str) -> str:
    return next(kind for kind in SCORES if task.startswith(kind))


def run(task: str, estimator: str, seed: int) -> dict[str, Any]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        score, steps = TASKS[task](estimator, seed)
    return dict(task=task, estimator=estimator, seed=seed, score=score, steps=steps, seconds=time.perf_counter() - start)


def table(runs: list[dict[str, Any]], estimators: list[str]) -> str:
    """Markdown table: one row per task, one column per estimator (mean over seeds, per-seed scores, solved count)."""
    tasks = [t for t in TASKS if any(r["task"] == t for r in runs)]
    estimators = [e for e in estimators if any(r["estimator"] == e for r in runs)]
    lines = [
        "| task | score | " + " | ".join(estimators) + " |",
        "|---|---|" + "---|" * len(estimators),
    ]
    for task in tasks:
        label, threshold = SCORES[score_kind(task)]
        cells = []
        for estimator in estimators:
            found = sorted((r for r in runs if r["task"] == task and r["estimator"] == estimator), key=lambda r: r["seed"])
            if not found:
                cells.append("")
                continue
            scores = np.array([r["score"] for r in found])
            fmt = "{:.2f}" if score_kind(task) == "arithmetic" else "{:.0f}"
            cell = fmt.format(scores.mean()) + " (" + " ".join(fmt.format(s) for s in scores) + ")"
            if threshold is not None:
                cell += f" {int((scores >= threshold).sum())}/{len(scores)}"
            cells.append(cell)
        solved = f", solved >= {threshold:g}" if threshold is not None else ""
        lines.append(f"| {task} | {label}{solved} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--estimators", nargs="+", default=list(DEFAULT_ESTIMATORS), choices=ESTIMATORS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "default_estimator.json"))
    parser.add_argument("--table-only", action="store_true", help="print the table of the JSON file and stop")
    args = parser.parse_args()
    th.set_num_threads(1)

    out = Path(args.out)
    runs: list[dict[str, Any]] = json.loads(out.read_text())["runs"] if out.exists() else []
    if not args.table_only:
        for task in args.tasks:
            for estimator in args.estimators:
                for seed in args.seeds:
                    if any(r["task"] == task and r["estimator"] == estimator and r["seed"] == seed for r in runs):
                        continue  # already measured
                    result = run(task, estimator, seed)
                    runs.append(result)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_text(json.dumps(dict(runs=runs), indent=1))
                    print(
                        f"{task:30s} {estimator:20s} seed {seed}: {result['score']:9.3f}  "
                        f"({result['steps']} steps, {result['seconds']:.0f} s)",
                        flush=True,
                    )
    print()
    print(table(runs, list(ESTIMATORS)))


if __name__ == "__main__":
    main()
