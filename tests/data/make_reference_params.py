"""Reference parameters: short seeded training runs of each algorithm, saved as ``tests/data/reference_<name>.npz``.

``tests/test_refactor_equivalence.py`` retrains every run below and asserts that each parameter equals the saved one
up to float32 rounding (its docstring states the tolerance), so a change meant to keep behaviour (a refactor) shows at
once if it does not. Remake the files only
where a change is meant to alter training, and say so in its commit::

    python tests/data/make_reference_params.py            # every run
    python tests/data/make_reference_params.py grpo_cartpole exact_trpo_pendulum
"""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env

DATA = pathlib.Path(__file__).parent


def _grpo_cartpole() -> Any:
    from sb3_grpo import GRPO

    env = make_vec_env("CartPole-v1", n_envs=4)
    model = GRPO(
        "MlpPolicy", env, n_steps=16, group_size=4, batch_size=32, n_epochs=2, advantage_estimator="group_zscore",
        policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    return model.learn(3 * 64)


def _grpo_pendulum() -> Any:
    from sb3_grpo import GRPO

    env = make_vec_env("Pendulum-v1", n_envs=4)
    model = GRPO(
        "MlpPolicy", env, groups_per_rollout=2, group_size=4, batch_size=64, n_epochs=2, beta=0.04,
        clip_range_high=0.28, advantage_estimator="group_zscore", policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    return model.learn(2 * 400)


def _grpo_branching_pendulum() -> Any:
    from sb3_grpo import GRPO

    env = make_vec_env("Pendulum-v1", n_envs=4)
    model = GRPO(
        "MlpPolicy", env, n_steps=40, group_size=2, batch_size=80, n_epochs=1, branch_every=20,
        advantage_estimator="group_zscore", policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    return model.learn(2 * 160)


def _exact_trpo_cartpole() -> Any:
    from sb3_grpo import ExactTRPO

    model = ExactTRPO(
        "MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, n_critic_updates=2, fisher_subsample=16,
        policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    return model.learn(2 * 64)


def _exact_trpo_pendulum() -> Any:
    from sb3_grpo import ExactTRPO

    model = ExactTRPO(
        "MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, n_critic_updates=2,
        policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    return model.learn(2 * 64)


def _adaptive_kl_ppo_cartpole() -> Any:
    from sb3_grpo import AdaptiveKLPPO

    model = AdaptiveKLPPO(
        "MlpPolicy", "CartPole-v1", n_steps=64, batch_size=16, n_epochs=2, clip_range=0.2, kl_estimator="k3",
        policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    return model.learn(2 * 64)


def _adaptive_kl_ppo_pendulum() -> Any:
    from sb3_grpo import AdaptiveKLPPO

    model = AdaptiveKLPPO(
        "MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=16, n_epochs=2, early_stop_kl=0.5,
        policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    return model.learn(3 * 64)


def _reinforce_cartpole() -> Any:
    from sb3_grpo import REINFORCE

    env = make_vec_env("CartPole-v1", n_envs=2)
    model = REINFORCE(
        "MlpPolicy", env, n_steps=48, batch_size=32, n_epochs=2, baseline="moving_average", max_grad_norm=0.5,
        policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    return model.learn(3 * 96)


def _online_dpo_cartpole() -> Any:
    from sb3_grpo import OnlineDPO

    env = make_vec_env("CartPole-v1", n_envs=4)
    model = OnlineDPO(
        "MlpPolicy", env, groups_per_rollout=3, group_size=4, batch_size=4, n_epochs=2, pairs="all", beta=0.2,
        ref_update_interval=2, policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu",
    )  # fmt: skip
    return model.learn(3 * 200)


#: Run name -> a function that trains a model with seed 0 and returns it.
RUNS: dict[str, Callable[[], Any]] = {
    "grpo_cartpole": _grpo_cartpole,
    "grpo_pendulum": _grpo_pendulum,
    "grpo_branching_pendulum": _grpo_branching_pendulum,
    "exact_trpo_cartpole": _exact_trpo_cartpole,
    "exact_trpo_pendulum": _exact_trpo_pendulum,
    "adaptive_kl_ppo_cartpole": _adaptive_kl_ppo_cartpole,
    "adaptive_kl_ppo_pendulum": _adaptive_kl_ppo_pendulum,
    "reinforce_cartpole": _reinforce_cartpole,
    "online_dpo_cartpole": _online_dpo_cartpole,
}


def path(name: str) -> pathlib.Path:
    return DATA / f"reference_{name}.npz"


def train(name: str) -> dict[str, np.ndarray]:
    """The trained parameters of run ``name`` (its policy's state dict, and any extra state that training adapts)."""
    th.set_num_threads(1)
    model = RUNS[name]()
    params = {key: value.detach().cpu().numpy() for key, value in model.policy.state_dict().items()}
    if hasattr(model, "kl_coef"):
        params["kl_coef"] = np.asarray(model.kl_coef, dtype=np.float64)
    if getattr(model, "baseline_value", None) is not None:  # REINFORCE's moving-average baseline
        params["baseline_value"] = np.asarray(model.baseline_value, dtype=np.float64)
    return params


if __name__ == "__main__":
    for name in sys.argv[1:] or list(RUNS):
        np.savez(path(name), **train(name))
        print(f"wrote {path(name)}")
