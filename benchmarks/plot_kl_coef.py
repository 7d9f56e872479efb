"""
Plot AdaptiveKLPPO's penalty coefficient beta and the measured KL over one training run (issue: "plot beta and
KL over training for one run").

    python -m benchmarks.plot_kl_coef [--env CartPole-v1] [--steps 100000] [--seed 0]

Uses zoo_configs/adaptive_kl_ppo.yml's entry for the env; writes benchmarks/results/kl_coef_<env>.png.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch as th
from stable_baselines3.common.logger import KVWriter, Logger

from benchmarks.harness import build

ROOT = Path(__file__).resolve().parents[1]


class Recorder(KVWriter):
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def write(self, key_values, key_excluded, step=0) -> None:
        if "train/kl_coef" in key_values:
            self.rows.append({"step": step, "beta": key_values["train/kl_coef"], "kl": key_values["train/kl"]})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    th.set_num_threads(1)
    model, _, _ = build("adaptive_kl_ppo", args.env, args.seed)
    recorder = Recorder()
    model.set_logger(Logger(folder=None, output_formats=[recorder]))
    model.learn(args.steps)
    steps = np.array([r["step"] for r in recorder.rows])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax1 = plt.subplots(figsize=(7, 3.6))
    ax1.semilogy(steps, [r["beta"] for r in recorder.rows], color="tab:blue", label="beta (kl_coef)")
    ax1.set_xlabel("env steps")
    ax1.set_ylabel("beta", color="tab:blue")
    ax2 = ax1.twinx()
    ax2.semilogy(steps, [max(r["kl"], 1e-6) for r in recorder.rows], color="tab:orange", lw=0.8, label="measured KL")
    ax2.axhline(model.target_kl, color="tab:orange", ls=":", lw=1)
    ax2.axhline(model.target_kl * 1.5, color="grey", ls=":", lw=0.7)
    ax2.axhline(model.target_kl / 1.5, color="grey", ls=":", lw=0.7)
    ax2.set_ylabel("KL(pi_old || pi) per update", color="tab:orange")
    ax1.set_title(f"AdaptiveKLPPO on {args.env} (seed {args.seed}): beta and KL, target {model.target_kl}")
    fig.tight_layout()
    out = ROOT / "benchmarks" / "results" / f"kl_coef_{args.env}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    within = np.mean([model.target_kl / 1.5 <= r["kl"] <= model.target_kl * 1.5 for r in recorder.rows])
    print(
        f"{len(recorder.rows)} updates; final beta {model.kl_coef:.3g}; share of updates with KL within "
        f"[target/1.5, 1.5 target]: {within:.2f}; wrote {out}"
    )


if __name__ == "__main__":
    main()
