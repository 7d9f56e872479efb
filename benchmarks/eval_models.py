"""
Evaluate the models a harness cell saved (``python -m benchmarks.harness ... --save-models``) again, each with its
deterministic policy (what the harness, SB3's ``EvalCallback`` and rl-zoo evaluate) and with its action noise (the
policy that training optimises), on the same start states for every model; and between each model and the one
listed before it, how far the update moved the policy on the states the earlier one's deterministic episodes visit.

    python -m benchmarks.eval_models benchmarks/work/<cell>.models --steps 975000 1000000 1000592 --episodes 20

One markdown row per model: the mean ± std return and mean length of its deterministic and of its noisy episodes, its
mean action noise (std), and, from the model listed before it, the mean KL divergence and the mean absolute change of
the mean action on those states.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np


def cell_of(directory: Path) -> tuple[str, str]:
    """The algorithm (without the sweep tag) and env of the cell whose models ``directory`` holds."""
    from benchmarks.harness import parse_cell_name

    try:
        algo, env_id, _, _ = parse_cell_name(directory.name.removesuffix(".models"))
    except ValueError:
        raise ValueError(f"{directory} is not a cell's models directory (<algo>__<env>__s<seed>__<budget>.models)") from None
    return algo.partition(":")[0], env_id


def load(directory: Path, step: int, seed: int) -> tuple[Any, Any]:
    """The model saved at ``step`` and a one-env evaluation env seeded ``seed``, normalised as it was trained."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from benchmarks.harness import algorithm_class

    algo, env_id = cell_of(directory)
    path = directory / f"{step}.zip"
    if not path.exists():
        saved = sorted(int(p.stem) for p in directory.glob("*.zip"))
        raise FileNotFoundError(f"no model saved at {step} steps in {directory}; saved: {saved}")
    model = algorithm_class(algo).load(path, device="cpu")
    env = make_vec_env(env_id, n_envs=1, seed=seed)
    stats = directory / f"{step}.vecnormalize.pkl"
    if stats.exists():
        env = VecNormalize.load(str(stats), env)
        env.training, env.norm_reward = False, False
    return model, env


def episodes(model: Any, env: Any, n: int, deterministic: bool, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns, lengths and the observations (before any normalisation) of ``n`` episodes; the action noise is seeded
    ``seed``."""
    import torch as th

    th.manual_seed(seed)
    env.seed(seed)
    obs = env.reset()
    returns, lengths, observations = [], [], []
    ret, length = 0.0, 0
    while len(returns) < n:
        observations.append(env.get_original_obs()[0] if hasattr(env, "get_original_obs") else obs[0])
        action, _ = model.predict(obs, deterministic=deterministic)
        obs, reward, done, _ = env.step(action)
        ret += float(env.get_original_reward()[0]) if hasattr(env, "get_original_reward") else float(reward[0])
        length += 1
        if done[0]:
            returns.append(ret)
            lengths.append(length)
            ret, length = 0.0, 0
    return np.array(returns), np.array(lengths), np.array(observations, dtype=np.float32)


def policy_shift(before: tuple[Any, Any], after: tuple[Any, Any], observations: np.ndarray) -> tuple[float, float]:
    """Mean KL(before || after) and mean absolute change of the mean action over ``observations``, each
    (model, env) pair seeing them normalised as its env normalises them."""
    import torch as th

    from sb3_grpo.common.kl import distribution_parameters, exact_kl

    def distribution(model: Any, env: Any) -> Any:
        obs = env.normalize_obs(observations) if hasattr(env, "normalize_obs") else observations
        return model.policy.get_distribution(th.as_tensor(obs, dtype=th.float32))

    with th.no_grad():
        p, q = distribution(*before), distribution(*after)
        kl = exact_kl(distribution_parameters(p), q)
        return float(kl.mean()), float((q.distribution.mean - p.distribution.mean).abs().mean())


def evaluate(directory: Path, steps: list[int], n_episodes: int, seed: int = 123) -> list[dict[str, Any]]:
    import torch as th

    rows: list[dict[str, Any]] = []
    previous: tuple[Any, Any, np.ndarray] | None = None
    for step in steps:
        model, env = load(directory, step, seed)
        row: dict[str, Any] = {"steps": step}
        returns, lengths, visited = episodes(model, env, n_episodes, True, seed)
        row["deterministic"] = (float(returns.mean()), float(returns.std()), float(lengths.mean()))
        returns, lengths, _ = episodes(model, env, n_episodes, False, seed)
        row["noisy"] = (float(returns.mean()), float(returns.std()), float(lengths.mean()))
        row["std"] = float(th.exp(model.policy.log_std.detach()).mean()) if hasattr(model.policy, "log_std") else float("nan")
        if previous is None:
            row["kl"] = row["mean_shift"] = None
        else:
            row["kl"], row["mean_shift"] = policy_shift(previous[:2], (model, env), previous[2])
            previous[1].close()
        rows.append(row)
        previous = (model, env, visited)
    if previous is not None:
        previous[1].close()
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| steps | deterministic: return (length) | noisy: return (length) | noise std | KL from the row above "
        "| mean action moved |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        det, noisy = r["deterministic"], r["noisy"]
        shift = "- | -" if r["kl"] is None else f"{r['kl']:.4f} | {r['mean_shift']:.4f}"
        lines.append(
            f"| {r['steps']} | {det[0]:.0f} ± {det[1]:.0f} ({det[2]:.0f}) | {noisy[0]:.0f} ± {noisy[1]:.0f} "
            f"({noisy[2]:.0f}) | {r['std']:.3f} | {shift} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import torch as th

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", help="a cell's models directory, <out>/<cell>.models")
    parser.add_argument("--steps", type=int, nargs="+", required=True, help="the saved models to evaluate, in order")
    parser.add_argument("--episodes", type=int, default=20, help="episodes per model and policy")
    parser.add_argument("--seed", type=int, default=123, help="seeds the start states and the action noise")
    args = parser.parse_args(argv)
    th.set_num_threads(1)
    try:
        rows = evaluate(Path(args.models), args.steps, args.episodes, args.seed)
    except (FileNotFoundError, ValueError) as exc:
        parser.error(str(exc))
    print(markdown(rows))


if __name__ == "__main__":
    main()
