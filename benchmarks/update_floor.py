"""
How high GRPO's env-stepping share can go at the zoo hyperparameters: the cost of one env step against the cost of
the update it brings, down to the policy network's own forward and backward pass, one torch thread.

    python -m benchmarks.update_floor [--envs CartPole-v1 Pendulum-v1] [--algo grpo] [--repeats 200]

Per env, on a batch of the zoo entry (``benchmarks.harness.build``, after ``--warmup`` steps of training), in
microseconds: one VecEnv step per env (random actions, ``step_wait`` of the training VecEnv), one minibatch gradient
step of ``train()`` (its wall time over one batch divided by its minibatch steps: forward, loss, backward, gradient
clipping, optimizer step, logging), and within it the policy network's forward and backward pass alone (features,
hidden layers, action net; ``sum().backward()``) and the optimizer step alone; then the activation function of the
hidden layers on one minibatch's hidden units, in torch and in numpy.

Each gradient step trains on ``batch_size`` env steps and every env step is trained on ``n_epochs`` times, so the
update costs ``n_epochs / batch_size`` gradient steps per env step. The bounds printed are the env-stepping share
if the rollout cost nothing but the env steps: with today's gradient step, and with a gradient step reduced to the
network's forward and backward pass (every other operator free). The second is the most any change can reach
without changing the hyperparameters (``n_epochs``, ``batch_size``, the network) or the arithmetic.
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


def measure(env_id: str, algo: str = "grpo", warmup: int = 3000, repeats: int = 200, seed: int = 0) -> dict[str, Any]:
    """The per-step costs (microseconds) and the bounds of one env (see the module docstring)."""
    import torch as th

    from benchmarks import harness

    th.set_num_threads(1)
    model, _, _ = harness.build(algo, env_id, seed)
    model.learn(warmup)
    policy, buffer, venv = model.policy, model.rollout_buffer, model.get_env()
    n_epochs, batch_size = model.n_epochs, model.batch_size
    minibatches = n_epochs * math.ceil(buffer.size / batch_size)

    start = time.perf_counter()
    model.train()
    step_us = (time.perf_counter() - start) * 1e6 / minibatches

    batch = next(buffer.get(batch_size, np.random.default_rng(seed)))
    features_extractor = policy.features_extractor

    def network() -> None:
        policy.optimizer.zero_grad()
        latent = policy.policy_net(policy.extract_features(batch.observations, features_extractor))
        policy.action_net(latent).sum().backward()

    network_us = _median_us(network, repeats)
    optimizer_us = _median_us(policy.optimizer.step, repeats)

    actions = np.stack([venv.action_space.sample() for _ in range(venv.num_envs)])
    venv.reset()
    env_us = _median_us(lambda: venv.step(actions), repeats) / venv.num_envs

    width = policy.net_arch[0] if policy.net_arch else policy.features_dim
    activation = policy.activation_fn()
    hidden = th.randn(batch_size, width)
    torch_us = _median_us(lambda: activation(hidden), repeats)
    numpy_fn = {"Tanh": np.tanh, "ReLU": lambda x: np.maximum(x, 0)}.get(type(activation).__name__)
    numpy_us = _median_us(lambda: numpy_fn(hidden.numpy()), repeats) if numpy_fn else float("nan")

    update_per_env_step = n_epochs / batch_size
    return {
        "env": env_id,
        "algo": algo,
        "n_epochs": n_epochs,
        "batch_size": batch_size,
        "env_step_us": env_us,
        "gradient_step_us": step_us,
        "network_fwd_bwd_us": network_us,
        "optimizer_step_us": optimizer_us,
        "activation": type(activation).__name__,
        "activation_torch_us": torch_us,
        "activation_numpy_us": numpy_us,
        "share_bound_today": env_us / (env_us + update_per_env_step * step_us),
        "share_bound_network_only": env_us / (env_us + update_per_env_step * network_us),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Pendulum-v1"])
    parser.add_argument("--algo", default="grpo")
    parser.add_argument("--warmup", type=int, default=3000, help="training steps before measuring")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    for env_id in args.envs:
        r = measure(env_id, args.algo, args.warmup, args.repeats)
        print(
            f"{r['env']} ({r['algo']}, n_epochs {r['n_epochs']}, batch_size {r['batch_size']}), microseconds:\n"
            f"  env step (per env)                      {r['env_step_us']:8.1f}\n"
            f"  gradient step (one minibatch of train)  {r['gradient_step_us']:8.1f}\n"
            f"    network forward + backward alone      {r['network_fwd_bwd_us']:8.1f}\n"
            f"    optimizer step alone                  {r['optimizer_step_us']:8.1f}\n"
            f"  {r['activation']} on {r['batch_size']} x hidden units: torch {r['activation_torch_us']:.1f}, "
            f"numpy {r['activation_numpy_us']:.1f}\n"
            f"  env-stepping share at most: {r['share_bound_today']:.0%} with today's gradient step, "
            f"{r['share_bound_network_only']:.0%} with the network's forward and backward alone",
            flush=True,
        )


if __name__ == "__main__":
    main()
