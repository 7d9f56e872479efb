"""
Train on a GPU when there is one: pass ``device="cuda"`` (or ``"auto"``, the default, which picks the GPU if
there is one). The envs step on the CPU; the network's forward and backward passes run on the device.

MLP policies are usually faster on the CPU, as SB3 warns: the GPU waits on many small kernels. This script trains
a wider network (256x256) with minibatches of 1024 and says which device it used; even so, on one H100 it ran at
5.4k fps against 7.5k fps on the same machine's CPU with one thread (benchmarks/results/gpu_h100). A GPU pays off
with image observations (``CnnPolicy``) or much larger networks.

Runtime: about 1 minute on a CPU, about 30 s on an H100 machine. Expected output: ``device: cuda`` (or a line saying
no GPU was found and the CPU is used), the fps, and the evaluation score (which differs between devices: the same
seed gives a different floating-point order).

    python examples/train_on_gpu.py
"""

import os
import time

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_grpo import GRPO

FAST = os.environ.get("SB3_GRPO_EXAMPLE_FAST") == "1"  # set by tests/test_examples.py: a smoke-test budget
TOTAL_STEPS = 2_000 if FAST else 50_000

if th.cuda.is_available():
    device = "cuda"
    print(f"device: cuda ({th.cuda.get_device_name(0)})")
else:
    device = "cpu"
    th.set_num_threads(1)
    print("device: cpu (no CUDA GPU found: torch.cuda.is_available() is False)")

env = make_vec_env("CartPole-v1", n_envs=16, seed=0)
model = GRPO(
    "MlpPolicy",
    env,
    group_size=8,
    n_steps=64,
    batch_size=1024,
    n_epochs=10,
    learning_rate=lambda p: 1e-3 * p,
    policy_kwargs=dict(net_arch=[256, 256]),
    device=device,
    seed=0,
)
print(f"policy parameters on: {next(model.policy.parameters()).device}")
start = time.perf_counter()
model.learn(TOTAL_STEPS)
print(f"fps: {model.num_timesteps / (time.perf_counter() - start):.0f}")

mean, std = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=1000), n_eval_episodes=10)
print(f"eval: {mean:.1f} +/- {std:.1f} over 10 episodes")
