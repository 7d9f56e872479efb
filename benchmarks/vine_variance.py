"""
Common random numbers in branching groups, measured on a frozen policy before any training run.

A branching group restarts its G members from one state ``s`` (the vine of TRPO, Schulman et al. 2015, section 5.2)
and compares their discounted returns over the segment. The comparison is meant to credit the actions taken at
``s``, but each member also draws its own action noise at every later step of the segment, and that noise moves its
return as much as the first action does. With common random numbers (CRN), the members share their action noise
after the first step: ``a_t = clip(mu(s_t) + sigma * eps_t)`` with one ``eps_t`` per group, so two members whose first
actions agree follow the same trajectory (MuJoCo is deterministic given state and actions) and the difference of
their returns is the effect of the first action alone, carried through the dynamics.

For each of ``--states`` states visited by the frozen policy, the first action ``a`` of member 0 is drawn once and
held; ``--repeats`` branches from ``s`` then estimate its advantage ``A(s, a) = R_0 - mean_{j > 0} R_j`` (the other
members draw their own first actions, fresh per branch), with and without CRN. Reported per env and setting: the
variance of that estimate over the repeats (the noise a training update sees for one (state, action) pair), its mean
(both settings estimate the same advantage), and the correlation of two members' returns across repeats (how much
of a return the later noise decides).

The policy: the env's GRPO zoo entry trained ``--train-steps`` steps (one torch thread, seed 0), observation
normalisation frozen. Rows are appended to ``benchmarks/results/vine_variance.csv``.

    python -m benchmarks.vine_variance --envs HalfCheetah-v5 Hopper-v5 --train-steps 100000
"""

from __future__ import annotations

import argparse
import csv
import datetime
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness

RESULTS = harness.ROOT / "benchmarks" / "results" / "vine_variance.csv"
FIELDS = [
    "env", "train_steps", "segment", "gamma", "group_size", "states", "repeats", "crn", "advantage_var_mean",
    "advantage_var_median", "advantage_mean_abs", "return_corr", "seconds", "date", "commit",
]  # fmt: skip


def frozen_policy(env_id: str, train_steps: int, seed: int = 0) -> tuple[Any, Any]:
    """The GRPO zoo entry for ``env_id`` trained ``train_steps`` steps; returns (policy, obs normaliser or None)."""
    import torch as th

    th.set_num_threads(1)
    model, _, _ = harness.build("grpo", env_id, seed)
    if train_steps:
        model.learn(train_steps)
    venv = model.get_env()
    normalizer = venv if hasattr(venv, "normalize_obs") else None
    return model.policy, normalizer


class Members:
    """``n`` copies of a MuJoCo env stepped in lockstep from one restored state (no time limit: segments are short),
    restored by the library's MuJoCo snapshotter (positions, velocities, actuator state, the solver's warm start:
    the env is then deterministic given state and actions, as branching groups restore it)."""

    def __init__(self, env_id: str, n: int):
        import gymnasium as gym

        from sb3_grpo.default_plugins.state_snapshots import MujocoSnapshot

        self.snapshot = MujocoSnapshot()
        self.envs = [gym.make(env_id).unwrapped for _ in range(n)]
        for i, env in enumerate(self.envs):
            env.reset(seed=i)

    def state(self, i: int = 0) -> Any:
        return self.snapshot.get(self.envs[i])

    def restore(self, state: Any) -> np.ndarray:
        return np.stack([self.snapshot.set(env, state) for env in self.envs])

    def step(self, actions: np.ndarray, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        obs, rewards, done = [], np.zeros(len(self.envs)), np.zeros(len(self.envs), dtype=bool)
        for i, env in enumerate(self.envs):
            if alive[i]:
                o, r, terminated, _, _ = env.step(actions[i])
                rewards[i], done[i] = r, terminated
                obs.append(o)
            else:
                obs.append(np.zeros(env.observation_space.shape))
        return np.stack(obs), rewards, done


def branch_returns(
    policy: Any,
    normalizer: Any,
    members: Members,
    state: Any,
    first_action: np.ndarray,
    segment: int,
    gamma: float,
    crn: bool,
    rng: np.random.Generator,
) -> np.ndarray:
    """The G members' discounted segment returns from ``state``; member 0's first action is ``first_action``."""
    import torch as th

    n = len(members.envs)
    obs = members.restore(state)
    alive = np.ones(n, dtype=bool)
    returns = np.zeros(n)
    std = th.exp(policy.log_std).detach().numpy()
    for t in range(segment):
        x = normalizer.normalize_obs(obs) if normalizer is not None else obs
        with th.no_grad():
            mean = policy.get_distribution(th.as_tensor(x, dtype=th.float32)).distribution.mean.numpy()
        if crn and t > 0:
            noise = np.broadcast_to(rng.standard_normal(mean.shape[1]), mean.shape)
        else:
            noise = rng.standard_normal(mean.shape)
        actions = mean + std * noise
        if t == 0:
            actions[0] = first_action
        actions = np.clip(actions, -1.0, 1.0)
        obs, rewards, done = members.step(actions, alive)
        returns += alive * gamma**t * rewards
        alive &= ~done
        if not alive.any():
            break
    return returns


def measure(env_id: str, train_steps: int, segment: int, group_size: int, n_states: int, repeats: int) -> list[dict]:
    import torch as th

    started_on = harness.commit()  # the working tree may change while it measures
    entry = harness.load_hyperparams("grpo", env_id)
    gamma = float(entry.get("gamma", 0.99))
    policy, normalizer = frozen_policy(env_id, train_steps)
    members = Members(env_id, group_size)
    rng = np.random.default_rng(0)
    # States visited by the policy (stochastic actions), spaced along one episode of the first member.
    states, actions = [], []
    obs = members.restore(members.state(0))[0]
    std = th.exp(policy.log_std).detach().numpy()
    for t in range(1, 50 * n_states + 1):
        x = normalizer.normalize_obs(obs[None]) if normalizer is not None else obs[None]
        with th.no_grad():
            mean = policy.get_distribution(th.as_tensor(x, dtype=th.float32)).distribution.mean.numpy()[0]
        action = mean + std * rng.standard_normal(mean.shape)
        if t % 50 == 0:
            states.append(members.state(0))
            actions.append(action.copy())  # the held first action: one draw from the policy at that state
        obs, _, terminated, _, _ = members.envs[0].step(np.clip(action, -1.0, 1.0))
        if terminated:
            members.envs[0].reset(seed=t)
            obs = members.envs[0]._get_obs()
    rows = []
    for crn in (False, True):
        start = time.perf_counter()
        variances, means, corrs = [], [], []
        for state, first in zip(states, actions, strict=True):
            returns = np.stack(
                [branch_returns(policy, normalizer, members, state, first, segment, gamma, crn, rng) for _ in range(repeats)]
            )
            advantage = returns[:, 0] - returns[:, 1:].mean(axis=1)
            variances.append(advantage.var(ddof=1))
            means.append(advantage.mean())
            pair = returns[:, 1:3]
            corrs.append(np.corrcoef(pair[:, 0], pair[:, 1])[0, 1] if pair.std(axis=0).min() > 0 else 1.0)
        rows.append(
            dict(
                env=env_id,
                train_steps=train_steps,
                segment=segment,
                gamma=gamma,
                group_size=group_size,
                states=n_states,
                repeats=repeats,
                crn=crn,
                advantage_var_mean=float(np.mean(variances)),
                advantage_var_median=float(np.median(variances)),
                advantage_mean_abs=float(np.mean(np.abs(means))),
                return_corr=float(np.mean(corrs)),
                seconds=round(time.perf_counter() - start, 1),
                date=datetime.date.today().isoformat(),
                commit=started_on,
            )
        )
        print({k: rows[-1][k] for k in ("env", "crn", "advantage_var_mean", "advantage_var_median", "return_corr")})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["HalfCheetah-v5", "Hopper-v5"])
    parser.add_argument("--train-steps", type=int, default=100_000)
    parser.add_argument("--segment", type=int, default=100, help="steps per branch (GRPO's branch_every)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--states", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=32)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    out = Path(args.out)
    for env_id in args.envs:
        rows = measure(env_id, args.train_steps, args.segment, args.group_size, args.states, args.repeats)
        new = not out.exists()
        with out.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            if new:
                writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
