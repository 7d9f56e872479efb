"""Refuse non-finite rewards and observations from the env in the rollouts of ExactTRPO and AdaptiveKLPPO.

A NaN or inf from the env poisons the advantages, then every parameter, and the error that follows (if any) points
at the optimizer. :class:`FiniteRolloutMixin` checks each env step as it arrives, before it enters the rollout
buffer, and raises a ``ValueError`` naming the env's index in the VecEnv and the step of its episode. The check is
on the env's own values (under a ``VecNormalize``, the original rewards and observations, which the normalisation
would otherwise clip to finite numbers). GRPO checks its own rollouts (see :mod:`sb3_grpo.grpo.grpo`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ConvertCallback

__all__ = ["FiniteRolloutMixin", "check_finite_step"]


def _first_bad_row(value: Any) -> int | None:
    value = np.asarray(value)
    if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.complexfloating)):
        return None
    bad = ~np.isfinite(value.reshape(value.shape[0], -1)).all(axis=1)
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


def _finite(value: Any) -> bool:
    value = np.asarray(value)
    return value.dtype.kind not in "fc" or bool(np.isfinite(value).all())


def check_finite_step(observations: Any, rewards: np.ndarray, infos: list[dict[str, Any]], episode_step: np.ndarray) -> None:
    """Raise a ``ValueError`` naming the env index and episode step of the first non-finite reward or observation.

    :param observations: the observations the VecEnv returned (array or dict of arrays, one row per env).
    :param rewards: ``(n_envs,)`` rewards.
    :param infos: the step's infos (their ``terminal_observation`` entries are checked too).
    :param episode_step: ``(n_envs,)`` the step of its episode each env has just taken (1 for the first).
    """
    rewards = np.asarray(rewards)
    parts = list(observations.items()) if isinstance(observations, dict) else [(None, observations)]
    # The common case costs one vectorised test per array (this runs on every env step).
    if _finite(rewards) and all(_finite(value) for _, value in parts) and not any("terminal_observation" in i for i in infos):
        return
    bad = ~np.isfinite(rewards)
    if bad.any():
        env = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"Env {env} (its index in the VecEnv) returned a non-finite reward ({float(rewards[env])}) at step "
            f"{int(episode_step[env])} of its episode. Fix the env (or wrap it to clip or replace such rewards)."
        )
    for key, value in parts:
        row = _first_bad_row(value)
        if row is not None:
            where = "" if key is None else f" (key {key!r})"
            raise ValueError(
                f"Env {row} (its index in the VecEnv) returned a non-finite observation{where} (NaN or inf) at step "
                f"{int(episode_step[row])} of its episode. Fix the env, or find the source with SB3's VecCheckNan wrapper."
            )
    for env, info in enumerate(infos):
        terminal = info.get("terminal_observation")
        if terminal is None:
            continue
        values = terminal.values() if isinstance(terminal, dict) else [terminal]
        if any(_first_bad_row(np.asarray(v).reshape(1, -1)) is not None for v in values):
            raise ValueError(
                f"Env {env} (its index in the VecEnv) returned a non-finite terminal observation (NaN or inf) at step "
                f"{int(episode_step[env])} of its episode. Fix the env, or find the source with SB3's VecCheckNan wrapper."
            )


class _FiniteStepCheck(BaseCallback):
    """Runs :func:`check_finite_step` on every env step of ``collect_rollouts`` (before the step is stored)."""

    def _on_training_start(self) -> None:
        model: Any = self.model
        n_envs = self.training_env.num_envs
        steps = getattr(model, "_finite_check_episode_step", None)
        if steps is None or len(steps) != n_envs:
            steps = np.zeros(n_envs, dtype=np.int64)
        starts = model._last_episode_starts
        if starts is not None and len(starts) == n_envs:
            steps = np.where(np.asarray(starts, dtype=bool), 0, steps)
        model._finite_check_episode_step = steps

    def _on_step(self) -> bool:
        model: Any = self.model
        steps = model._finite_check_episode_step
        steps += 1
        vec_normalize = model._vec_normalize_env
        if vec_normalize is not None:
            observations, rewards = vec_normalize.get_original_obs(), vec_normalize.get_original_reward()
        else:
            observations, rewards = self.locals["new_obs"], self.locals["rewards"]
        check_finite_step(observations, rewards, self.locals.get("infos", []), steps)
        dones = np.asarray(self.locals["dones"], dtype=bool)
        if dones.any():
            steps[dones] = 0
        return True


class FiniteRolloutMixin:
    """Adds the non-finite reward/observation check to an SB3 on-policy algorithm's ``learn`` (first callback)."""

    def _init_callback(self, callback: Any, progress_bar: bool = False) -> BaseCallback:
        check: BaseCallback = _FiniteStepCheck()
        if callback is not None:  # without user callbacks, the check alone: SB3 calls every callback on every step
            if isinstance(callback, list):
                callback = CallbackList(callback)
            if not isinstance(callback, BaseCallback):
                callback = ConvertCallback(callback)
            check = CallbackList([check, callback])
        return super()._init_callback(check, progress_bar)  # type: ignore[misc]

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_finite_check_episode_step"]  # type: ignore[misc]
