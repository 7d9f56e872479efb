"""Helpers shared by GRPO's test files (``test_grpo_*.py``)."""

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env

from sb3_grpo import GRPO

DEVICES = ["cpu"] + (["cuda"] if th.cuda.is_available() else [])


def params(model):
    return th.cat([p.detach().cpu().flatten() for p in model.policy.parameters()])


def first_obs_by_group(buffer, group_size):
    """First (stored) observation of every trajectory, grouped."""
    starts = np.r_[0, np.cumsum(np.bincount(buffer.trajectory))[:-1]]
    firsts = buffer.observations[starts]
    return [firsts[g * group_size : (g + 1) * group_size] for g in range(len(firsts) // group_size)]


def straight_and_reloaded(make, env_id, steps, tmp_path):
    """A model trained ``2 * steps`` in one go, and one trained ``steps``, saved and reloaded (not yet continued)."""
    straight = make()
    straight.learn(steps)
    straight.learn(steps, reset_num_timesteps=False)
    first = make()
    first.learn(steps)
    first.save(tmp_path / "m.zip")
    loaded = GRPO.load(tmp_path / "m.zip", env=make_vec_env(env_id, n_envs=2), device="cpu")
    return straight, first, loaded
