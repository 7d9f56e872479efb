"""
How high GRPO's env-stepping share can go at the zoo hyperparameters: the cost of one env step against the cost of
the update it brings, down to the policy network's own forward and backward pass, one torch thread.

    python -m benchmarks.update_floor [--envs CartPole-v1 Pendulum-v1] [--algo grpo] [--steps 30000] [--repeats 200]

Per env, in microseconds per env step of a timed training run of ``--steps`` steps at the zoo entry
(``benchmarks.harness.build``; as ``bench_throughput`` times it): the env (the training VecEnv's ``step_wait``) and
the update (``train()``); then, on the last batch, one minibatch gradient step (forward, loss, backward, gradient
clipping, optimizer step, logging), the policy network's forward and backward pass alone on one minibatch
(features, hidden layers, action net; ``sum().backward()``; per env step: times ``n_epochs / batch_size``, as every
step is trained ``n_epochs`` times) and the optimizer step alone; and the activation function of the hidden layers
on one minibatch's hidden units, in torch and in numpy.

The bounds printed are the env-stepping share if the rollout cost nothing but the env steps: with today's update,
and with an update reduced to the network's forward and backward passes (every other operator free). The second
is the most any change can reach without changing the hyperparameters (``n_epochs``, ``batch_size``, the network)
or the arithmetic.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _median_us(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def measure(env_id: str, algo: str = "grpo", steps: int = 30_000, repeats: int = 200, seed: int = 0) -> dict[str, Any]:
    """The per-step costs (microseconds) and the bounds of one env (see the module docstring)."""
    import torch as th

    from benchmarks import harness

    th.set_num_threads(1)
    model, _, _ = harness.build(algo, env_id, seed)
    venv = model.get_env()
    seconds = {"env": 0.0, "update": 0.0}

    def timed(key: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            start = time.perf_counter()
            try:
                return fn()
            finally:
                seconds[key] += time.perf_counter() - start

        return call

    venv.step_wait = timed("env", venv.step_wait)  # type: ignore[method-assign]
    model.train = timed("update", model.train)  # type: ignore[method-assign]
    start = time.perf_counter()
    model.learn(steps)
    wall = time.perf_counter() - start
    env_us, update_us = (seconds[k] * 1e6 / model.num_timesteps for k in ("env", "update"))

    policy, buffer = model.policy, model.rollout_buffer
    n_epochs, batch_size = model.n_epochs, model.batch_size
    batch = next(buffer.get(batch_size, np.random.default_rng(seed)))
    features_extractor = policy.features_extractor

    def network() -> None:
        policy.optimizer.zero_grad()
        latent = policy.policy_net(policy.extract_features(batch.observations, features_extractor))
        policy.action_net(latent).sum().backward()

    network_us = _median_us(network, repeats)
    optimizer_us = _median_us(policy.optimizer.step, repeats)
    minibatches = n_epochs * math.ceil(buffer.size() / batch_size)
    gradient_step_us = _median_us(model.train, 3) / minibatches  # on the last batch
    network_per_env_step_us = network_us * n_epochs / batch_size  # every step is trained n_epochs times

    width = policy.net_arch[0] if policy.net_arch else policy.features_dim
    activation = policy.activation_fn()
    hidden = th.randn(batch_size, width)
    torch_us = _median_us(lambda: activation(hidden), repeats)
    numpy_fn = {"Tanh": np.tanh, "ReLU": lambda x: np.maximum(x, 0)}.get(type(activation).__name__)
    numpy_us = _median_us(lambda: numpy_fn(hidden.numpy()), repeats) if numpy_fn else float("nan")

    return {
        "env": env_id,
        "algo": algo,
        "n_epochs": n_epochs,
        "batch_size": batch_size,
        "env_step_us": env_us,
        "env_step_share": seconds["env"] / wall,
        "gradient_step_us": gradient_step_us,
        "update_per_env_step_us": update_us,
        "network_per_env_step_us": network_per_env_step_us,
        "network_fwd_bwd_us": network_us,
        "optimizer_step_us": optimizer_us,
        "activation": type(activation).__name__,
        "activation_torch_us": torch_us,
        "activation_numpy_us": numpy_us,
        "share_bound_today": env_us / (env_us + update_us),
        "share_bound_network_only": env_us / (env_us + network_per_env_step_us),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Pendulum-v1"])
    parser.add_argument("--algo", default="grpo")
    parser.add_argument("--steps", type=int, default=30_000, help="training steps of the timed run")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    for env_id in args.envs:
        r = measure(env_id, args.algo, args.steps, args.repeats)
        print(
            f"{r['env']} ({r['algo']}, n_epochs {r['n_epochs']}, batch_size {r['batch_size']}), microseconds:\n"
            f"  env step (per env step, in training) {r['env_step_us']:8.1f}  ({r['env_step_share']:.0%} of wall time)\n"
            f"  update (per env step, in training)   {r['update_per_env_step_us']:8.1f}\n"
            f"    network alone, per env step           {r['network_per_env_step_us']:8.1f}\n"
            f"  gradient step (one minibatch of train)  {r['gradient_step_us']:8.1f}\n"
            f"    network forward + backward alone      {r['network_fwd_bwd_us']:8.1f}\n"
            f"    optimizer step alone                  {r['optimizer_step_us']:8.1f}\n"
            f"  {r['activation']} on {r['batch_size']} x hidden units: torch {r['activation_torch_us']:.1f}, "
            f"numpy {r['activation_numpy_us']:.1f}\n"
            f"  env-stepping share at most: {r['share_bound_today']:.0%} with today's update, "
            f"{r['share_bound_network_only']:.0%} with the network's forward and backward alone",
            flush=True,
        )


if __name__ == "__main__":
    main()
