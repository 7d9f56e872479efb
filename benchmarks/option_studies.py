"""
Option studies: what one option of an algorithm changes, trained side by side on small envs.

Each study trains the zoo entry (``zoo_configs/<algo>.yml``) of its algorithm on each env, once per setting of the
option and seed, with every other hyperparameter as the entry has it, and prints one markdown table per env: the final
greedy evaluation (mean ± std over seeds of each seed's mean return on ``--n-eval-episodes`` deterministic episodes),
how many seeds reached the env's threshold (``benchmarks.harness.THRESHOLDS``) at an evaluation and the median step
count at which they did, and what the option is meant to change (mean ± std over seeds of each run's mean over its
updates). Results and the decisions drawn from them: ``docs/guide/option_studies.md``.

    python -m benchmarks.option_studies --study group_loss_scale --seeds 0 1 2
    python -m benchmarks.option_studies --study group_loss_scale --seeds 0 1 2 --envs Acrobot-v1

Studies: ``group_loss_scale``, ``importance_sampling_level``, ``mask_truncated``, ``loss_constant`` (GRPO),
``line_search_accept_ratio`` (ExactTRPO), ``kl_horizon`` (AdaptiveKLPPO). Runs go one after the other, torch on one
thread; each takes the env's ``--budget`` steps.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import THRESHOLDS, build, evaluate_model, every_n_steps

ROOT = Path(__file__).resolve().parents[1]
#: Gradient-norm clipping off: a bound no gradient reaches.
NO_CLIPPING = 1e9


@dataclass
class RunLog:
    """What one run recorded: the logger's values after each update, the norm of every policy gradient step before
    clipping, per update the fraction of the batch's steps with loss weight 0 (GRPO), and the evaluations."""

    updates: list[dict[str, float]] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    max_grad_norm: float = float("nan")
    target_kl: float | None = None
    dropped: list[float] = field(default_factory=list)
    evals: list[tuple[int, float]] = field(default_factory=list)
    seconds: float = 0.0

    def values(self, key: str) -> np.ndarray:
        return np.array([u[key] for u in self.updates if key in u], dtype=np.float64)


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


@dataclass(frozen=True)
class Metric:
    """A column: ``fn`` turns one run into a number; the table shows its mean ± std over seeds."""

    label: str
    fn: Callable[[RunLog], float]
    fmt: str = ".3g"


GRAD_NORM = Metric("policy grad norm before clipping", lambda r: _mean(np.array(r.grad_norms)))
CLIPPED = Metric(
    "grad steps clipped", lambda r: _mean(np.array(r.grad_norms) > r.max_grad_norm) if r.grad_norms else 0.0, ".2f"
)
GRAD_STEPS = Metric("grad steps per update", lambda r: len(r.grad_norms) / max(len(r.updates), 1), ".3g")
APPROX_KL = Metric("approx KL per update", lambda r: _mean(r.values("train/approx_kl")))
CLIP_FRACTION = Metric("ratio clip fraction", lambda r: _mean(r.values("train/clip_fraction")), ".3f")
DROPPED = Metric("steps dropped from the loss", lambda r: _mean(np.array(r.dropped)), ".2f")
SKIPPED = Metric("updates with no step", lambda r: _mean(np.array(r.dropped) >= 1.0) if r.dropped else 0.0, ".2f")
LS_STEPS = Metric("line-search evaluations", lambda r: _mean(r.values("train/line_search_steps")), ".2f")
LS_REJECTED = Metric("updates with no step", lambda r: 1.0 - _mean(r.values("train/is_line_search_success")), ".2f")
TRPO_KL = Metric("KL of the step taken", lambda r: _mean(r.values("train/kl")))


def _improvement_ratio(r: RunLog) -> float:
    success = r.values("train/is_line_search_success") > 0
    ratio = r.values("train/surrogate_improvement") / np.maximum(r.values("train/expected_improvement"), 1e-300)
    return _mean(ratio[success])


IMPROVEMENT = Metric("improvement / first-order prediction (steps taken)", _improvement_ratio, ".2f")


def _kl_over_target(r: RunLog) -> np.ndarray:
    return r.values("train/kl") / (r.target_kl or float("nan"))


KL_IN_BAND = Metric(
    "updates with target/1.5 <= KL <= 1.5 target",
    lambda r: _mean((_kl_over_target(r) >= 1 / 1.5) & (_kl_over_target(r) <= 1.5)),
    ".2f",
)
KL_RATIO = Metric("median KL / target", lambda r: float(np.median(_kl_over_target(r))), ".2f")
FINAL_BETA = Metric("final beta", lambda r: float(r.values("train/kl_coef")[-1]), ".3g")


@dataclass(frozen=True)
class Study:
    """An option's settings (label, zoo-entry overrides) trained side by side on ``envs``."""

    algo: str
    option: str
    envs: tuple[str, ...]
    variants: tuple[tuple[str, dict[str, Any]], ...]
    metrics: tuple[Metric, ...]
    budget: int = 50_000
    #: Pairs of constructor arguments claimed to train to the same parameters: (claim, arguments a, arguments b).
    equivalences: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = ()


def _adam_eps(eps: float) -> dict[str, Any]:
    return {"policy_kwargs": {"optimizer_kwargs": {"eps": eps}}}


#: The Adam epsilon of the policies (as SB3's ActorCriticPolicy).
ADAM_EPS = 1e-5


def _group_loss_scale_variants() -> tuple[tuple[str, dict[str, Any]], ...]:
    variants: list[tuple[str, dict[str, Any]]] = [
        (f"G={g}, {scale}", {"group_size": g, "group_loss_scale": scale}) for g in (4, 8, 16, 32) for scale in ("mean", "sqrt")
    ]
    variants += [
        (f"G=32, {scale}, no grad clipping", {"group_size": 32, "group_loss_scale": scale, "max_grad_norm": NO_CLIPPING})
        for scale in ("mean", "sqrt")
    ]
    return tuple(variants)


#: Options these studies led to remove (docs/guide/option_studies.md): the algorithms no longer take them, so their
#: studies run only from a commit before the removal.
REMOVED_OPTIONS = ("mask_truncated", "loss_constant", "line_search_accept_ratio")

STUDIES: dict[str, Study] = {
    "group_loss_scale": Study(
        "grpo",
        "group_loss_scale",
        ("CartPole-v1",),
        _group_loss_scale_variants(),
        (GRAD_NORM, CLIPPED, APPROX_KL),
        equivalences=(
            *(
                (
                    f"G={g}: sqrt = mean with max_grad_norm and Adam's eps divided by sqrt(G)",
                    {"group_size": g, "group_loss_scale": "sqrt"},
                    {"group_size": g, "max_grad_norm": 0.5 / g**0.5, **_adam_eps(ADAM_EPS / g**0.5)},
                )
                for g in (8, 32)
            ),
            ("control, G=8: sqrt against mean", {"group_size": 8, "group_loss_scale": "sqrt"}, {"group_size": 8}),
        ),
    ),
    "importance_sampling_level": Study(
        "grpo",
        "importance_sampling_level",
        ("CartPole-v1",),
        (
            ("step", {"importance_sampling_level": "step"}),
            ("trajectory (GSPO)", {"importance_sampling_level": "trajectory"}),
            ("trajectory (GSPO), clip_range 0.02", {"importance_sampling_level": "trajectory", "clip_range": 0.02}),
        ),
        (CLIP_FRACTION, APPROX_KL, GRAD_STEPS),
    ),
    "mask_truncated": Study(
        "grpo",
        "mask_truncated",
        ("CartPole-v1", "Acrobot-v1"),
        (("False", {"mask_truncated": False}), ("True", {"mask_truncated": True})),
        (DROPPED, SKIPPED),
    ),
    "loss_constant": Study(
        "grpo",
        "loss_constant",
        ("CartPole-v1",),
        (
            ("bnpo (the default loss_type)", {"loss_type": "bnpo"}),
            ("dr_grpo, loss_constant None (= 500, the time limit)", {"loss_type": "dr_grpo"}),
            ("dr_grpo, loss_constant 50", {"loss_type": "dr_grpo", "loss_constant": 50.0}),
            ("dr_grpo, loss_constant 5000", {"loss_type": "dr_grpo", "loss_constant": 5000.0}),
            (
                "dr_grpo, loss_constant 50, no grad clipping",
                {"loss_type": "dr_grpo", "loss_constant": 50.0, "max_grad_norm": NO_CLIPPING},
            ),
            (
                "dr_grpo, loss_constant 5000, no grad clipping",
                {"loss_type": "dr_grpo", "loss_constant": 5000.0, "max_grad_norm": NO_CLIPPING},
            ),
        ),
        (GRAD_NORM, CLIPPED, APPROX_KL),
        equivalences=(
            (
                "loss_constant 50 = loss_constant 5000 with max_grad_norm and Adam's eps divided by 100",
                {"loss_type": "dr_grpo", "loss_constant": 50.0},
                {"loss_type": "dr_grpo", "loss_constant": 5000.0, "max_grad_norm": 0.005, **_adam_eps(ADAM_EPS / 100)},
            ),
            (
                "control: loss_constant 50 against 5000",
                {"loss_type": "dr_grpo", "loss_constant": 50.0},
                {"loss_type": "dr_grpo", "loss_constant": 5000.0},
            ),
        ),
    ),
    "line_search_accept_ratio": Study(
        "exact_trpo",
        "line_search_accept_ratio",
        ("CartPole-v1",),
        tuple((f"{ratio:g}", {"line_search_accept_ratio": ratio}) for ratio in (0.0, 0.1, 0.5)),
        (LS_STEPS, LS_REJECTED, TRPO_KL, IMPROVEMENT),
    ),
    "kl_horizon": Study(
        "adaptive_kl_ppo",
        "kl_horizon",
        ("CartPole-v1",),
        (
            ("schulman (the default kl_adaptation)", {"kl_adaptation": "schulman"}),
            *(
                (f"proportional, kl_horizon {h:,}", {"kl_adaptation": "proportional", "kl_horizon": h})
                for h in (1_000, 10_000, 100_000)
            ),
        ),
        (KL_IN_BAND, KL_RATIO, FINAL_BETA),
    ),
}


@contextlib.contextmanager
def _recording_grad_norms(norms: list[float]) -> Iterator[None]:
    """Record the norm (before clipping) of every ``th.nn.utils.clip_grad_norm_`` call of the algorithms."""
    import torch.nn.utils

    original = torch.nn.utils.clip_grad_norm_

    def recorded(parameters: Any, max_norm: float, *args: Any, **kwargs: Any) -> Any:
        norm = original(parameters, max_norm, *args, **kwargs)
        norms.append(float(norm))
        return norm

    torch.nn.utils.clip_grad_norm_ = recorded  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.nn.utils.clip_grad_norm_ = original


def run(
    algo: str, env_id: str, seed: int, overrides: dict[str, Any], budget: int, eval_freq: int, n_eval_episodes: int
) -> RunLog:
    """Train one setting for ``budget`` env steps, evaluating every ``eval_freq`` steps and at the end."""
    import torch as th

    th.set_num_threads(1)
    model, eval_env, _ = build(algo, env_id, seed, overrides=overrides)
    log = RunLog(max_grad_norm=float(model.max_grad_norm), target_kl=getattr(model, "target_kl", None))
    original_train = model.train
    policy_norms: list[float] = []

    def train() -> None:
        buffer = model.rollout_buffer
        weights = getattr(buffer, "weights", None)
        if weights is not None and algo == "grpo":
            log.dropped.append(float(np.mean(weights == 0)) if len(weights) else 0.0)
        original_train()
        log.updates.append(dict(model.logger.name_to_value))

    model.train = train  # type: ignore[method-assign]

    def evaluate() -> None:
        mean, _ = evaluate_model(model, eval_env, n_eval_episodes)
        log.evals.append((model.num_timesteps, mean))

    start = time.perf_counter()
    with _recording_grad_norms(policy_norms):
        model.learn(budget, callback=every_n_steps(eval_freq, evaluate))
    log.seconds = time.perf_counter() - start
    if not log.evals or log.evals[-1][0] != model.num_timesteps:
        evaluate()
    # Only GRPO's gradient steps are all policy steps (the critic algorithms also clip their critic's).
    log.grad_norms = policy_norms if algo == "grpo" else []
    return log


def parameter_difference(algo: str, a: dict[str, Any], b: dict[str, Any], steps: int = 3_000, seed: int = 3) -> float:
    """Train ``algo`` on CartPole-v1 (one env, 64-step rollouts) with arguments ``a`` and with ``b`` from the same
    seed; the largest absolute difference between their policy parameters afterwards."""
    import torch as th

    from benchmarks.harness import algorithm_class

    th.set_num_threads(1)
    flat = []
    for kwargs in (a, b):
        base = {"n_steps": 64, "batch_size": 128, "max_grad_norm": 0.5}
        model = algorithm_class(algo)("MlpPolicy", "CartPole-v1", seed=seed, device="cpu", **{**base, **kwargs})
        model.learn(steps)
        flat.append(th.cat([p.detach().flatten() for p in model.policy.parameters()]))
    return float((flat[0] - flat[1]).abs().max())


def run_study(
    name: str,
    seeds: Sequence[int],
    envs: Sequence[str] | None = None,
    budget: int | None = None,
    eval_freq: int = 10_000,
    n_eval_episodes: int = 10,
    settings: Sequence[str] | None = None,
    progress: bool = True,
) -> dict[str, dict[str, list[RunLog]]]:
    """``{env: {setting label: [one RunLog per seed]}}`` (``settings``: only the settings with these labels)."""
    study = STUDIES[name]
    labels = [label for label, _ in study.variants]
    unknown = sorted(set(settings or ()) - set(labels))
    if unknown:
        raise ValueError(f"Unknown settings {unknown} for the {name} study; its settings are {labels}.")
    results: dict[str, dict[str, list[RunLog]]] = {}
    for env_id in envs or study.envs:
        results[env_id] = {}
        for label, overrides in study.variants:
            if settings and label not in settings:
                continue
            logs = results[env_id].setdefault(label, [])
            for seed in seeds:
                log = run(study.algo, env_id, seed, overrides, budget or study.budget, eval_freq, n_eval_episodes)
                logs.append(log)
                if progress:
                    print(
                        f"{env_id} {label!r} seed {seed}: final {log.evals[-1][1]:.1f} ({log.seconds:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
    return results


def _mean_std(values: Sequence[float], fmt: str) -> str:
    x = np.asarray(values, dtype=np.float64)
    if np.all(np.isnan(x)):
        return "n/a"
    return f"{np.nanmean(x):{fmt}} ± {np.nanstd(x):{fmt}}"


def _reached(logs: Sequence[RunLog], threshold: float | None) -> str:
    if threshold is None:
        return "n/a"
    steps = [next((t for t, score in log.evals if score >= threshold), None) for log in logs]
    hits = [s for s in steps if s is not None]
    median = f", median {np.median(hits):,.0f} steps" if hits else ""
    return f"{len(hits)}/{len(logs)}{median}"


def format_table(name: str, env_id: str, results: dict[str, list[RunLog]]) -> str:
    """One markdown table: a row per setting."""
    study = STUDIES[name]
    threshold = THRESHOLDS.get(env_id)
    header = [study.option, "final eval", f"seeds reaching {threshold:g}" if threshold is not None else "threshold"]
    header += [m.label for m in study.metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, logs in results.items():
        row = [label, _mean_std([log.evals[-1][1] for log in logs], ".1f"), _reached(logs, threshold)]
        row += [_mean_std([m.fn(log) for log in logs], m.fmt) for m in study.metrics]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def overshoot_note(results: dict[str, list[RunLog]], budget: int, tolerance: float = 0.05) -> str:
    """A line naming the settings whose runs trained more than ``tolerance`` past the budget ("" if none): ``learn``
    finishes its last rollout, and a GRPO rollout holds whole groups."""
    over = {
        label: max(log.evals[-1][0] for log in logs)
        for label, logs in results.items()
        if max(log.evals[-1][0] for log in logs) > budget * (1 + tolerance)
    }
    if not over:
        return ""
    listed = "; ".join(f"{label}: {steps:,}" for label, steps in over.items())
    return f"Runs finish their last rollout; most steps trained, where over {budget:,} by more than {tolerance:.0%}: {listed}."


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def print_checks(study: Study) -> None:
    """Print the study's same-parameters checks (none: nothing)."""
    if study.equivalences:
        print(f"\nSame parameters after 3,000 steps on CartPole-v1 (seed 3)? Commit {_commit()}.\n")
        print("| claim | max abs difference of the policy parameters |\n|---|---|")
        for claim, a, b in study.equivalences:
            print(f"| {claim} | {parameter_difference(study.algo, a, b):.1e} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", required=True, choices=sorted(STUDIES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--envs", nargs="+", default=None, help="default: the study's envs")
    parser.add_argument("--budget", type=int, default=None, help="env steps per run (default: the study's, 50k)")
    parser.add_argument("--eval-freq", type=int, default=10_000)
    parser.add_argument("--n-eval-episodes", type=int, default=10)
    parser.add_argument("--settings", nargs="+", default=None, help="only these settings (their labels in the table)")
    parser.add_argument("--checks-only", action="store_true", help="only the study's same-parameters checks")
    args = parser.parse_args(argv)
    if args.study in REMOVED_OPTIONS:
        parser.error(
            f"{args.study} was removed after its study (docs/guide/option_studies.md); run this study from a commit "
            "before the removal"
        )
    study = STUDIES[args.study]
    if args.checks_only:
        print_checks(study)
        return
    budget = args.budget or study.budget
    commit, date = _commit(), time.strftime("%Y-%m-%d")
    results = run_study(args.study, args.seeds, args.envs, budget, args.eval_freq, args.n_eval_episodes, args.settings)
    for env_id, by_setting in results.items():
        seconds = sum(log.seconds for logs in by_setting.values() for log in logs)
        print(
            f"\n{study.algo} `{study.option}` on {env_id}: zoo entry, {budget:,} steps, seeds "
            f"{' '.join(map(str, args.seeds))}, greedy evaluation on {args.n_eval_episodes} episodes every "
            f"{args.eval_freq:,} steps and at the end; {date}, commit {commit}, "
            f"{seconds:.0f} s of training.\n"
        )
        print(format_table(args.study, env_id, by_setting))
        note = overshoot_note(by_setting, budget)
        if note:
            print(f"\n{note}")
    print_checks(study)


if __name__ == "__main__":
    main()
