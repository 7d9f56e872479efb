"""
Time one policy update (search direction + line search) of ExactTRPO against sb3-contrib's TRPO.

Both algorithms get the same rollout-zoo-like hyperparameters and 64x64 networks; each trains for ``--rollouts``
rollouts (default 1; the last update is a warm-up), then ``train()`` is timed on the last rollout with
``n_critic_updates=0`` (so only the policy step is measured), restoring the parameters before every repetition.
Later in training ExactTRPO's refinement of a subsampled Fisher needs more iterations (``refine`` column):
``--rollouts 25`` times the step at about 50k HalfCheetah steps. Torch runs on one thread (with two threads on a busy
2-core machine timings collapse).

    python benchmarks/bench_exact_trpo_update.py [--device cpu|cuda] [--reps 10] [--rollouts 1] [--envs CartPole-v1 ...]

Pendulum-v1 is timed without gSDE (rl-zoo's TRPO config uses gSDE, which has no closed-form Fisher: ExactTRPO would
use conjugate gradients there).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings

import torch as th
from sb3_contrib import TRPO
from stable_baselines3.common.env_util import make_vec_env

from sb3_grpo.exact_trpo import ExactTRPO

CONFIGS = {
    "CartPole-v1": dict(n_envs=2, n_steps=512, batch_size=512, cg_damping=1e-3, gae_lambda=0.98),
    "Pendulum-v1": dict(n_envs=2, n_steps=1024, gamma=0.9),
    "HalfCheetah-v5": dict(n_envs=2, n_steps=1024, batch_size=128, cg_max_steps=25, cg_damping=0.1, target_kl=0.04),
    "Hopper-v5": dict(n_envs=2, n_steps=1024, batch_size=128, cg_max_steps=25, cg_damping=0.1),
}


def time_update(algo: type, env_id: str, device: str, reps: int, extra: dict, rollouts: int = 1) -> tuple[list[float], str]:
    config = dict(CONFIGS[env_id])
    n_envs = config.pop("n_envs")
    env = make_vec_env(env_id, n_envs=n_envs, seed=0)
    model = algo("MlpPolicy", env, seed=0, device=device, **config, **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mean of the empty critic-loss list
        if rollouts > 1:
            model.learn(model.n_steps * n_envs * (rollouts - 1))  # with the critic
        model.n_critic_updates = 0
        model.learn(model.n_steps * n_envs, reset_num_timesteps=False)  # the timed rollout (and a warm-up update)
        state = copy.deepcopy(model.policy.state_dict())
        times = []
        for _ in range(reps):
            model.policy.load_state_dict(state)
            if device.startswith("cuda"):
                th.cuda.synchronize()
            start = time.perf_counter()
            model.train()
            if device.startswith("cuda"):
                th.cuda.synchronize()
            times.append(1000 * (time.perf_counter() - start))
    solver = str(model.logger.name_to_value.get("train/fisher_solver", f"cg ({model.cg_max_steps} steps)"))
    refine = model.logger.name_to_value.get("train/fisher_refine_steps")
    if refine:
        solver += f" + {refine} refine steps (residual {model.logger.name_to_value['train/fisher_residual']:.0e})"
    env.close()
    return times, solver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--envs", nargs="+", default=list(CONFIGS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rollouts", type=int, default=1, help="rollouts trained before the timed update")
    args = parser.parse_args()
    th.set_num_threads(args.threads)
    print(
        f"device={args.device} torch threads={th.get_num_threads()} reps={args.reps} rollouts={args.rollouts} "
        "(median ms per policy update)"
    )
    print(f"{'env':16s} {'states':>6s} {'TRPO (CG)':>10s} {'ExactTRPO':>10s} {'ratio':>6s}  solver")
    for env_id in args.envs:
        base, _ = time_update(TRPO, env_id, args.device, args.reps, {}, args.rollouts)
        exact, solver = time_update(ExactTRPO, env_id, args.device, args.reps, {}, args.rollouts)
        states = CONFIGS[env_id]["n_envs"] * CONFIGS[env_id]["n_steps"]
        ratio = statistics.median(exact) / statistics.median(base)
        print(
            f"{env_id:16s} {states:6d} {statistics.median(base):10.1f} {statistics.median(exact):10.1f} {ratio:6.2f}  {solver}"
        )


if __name__ == "__main__":
    main()
