"""Refuse non-finite rewards and observations from the env, each step as it arrives, in every algorithm's rollouts.

A NaN or inf from the env poisons the advantages, then every parameter, and the error that follows (if any) points
at the optimizer. :func:`with_finite_check` (the first callback of ``learn``, see
:class:`sb3_grpo.common.base_class.AlgorithmMixin`) checks each env step as it arrives, before it enters the rollout
buffer, and raises a ``ValueError`` naming the env's index in the VecEnv and the step of its episode. The check is
on the env's own values (under a ``VecNormalize``, the original rewards and observations, which the normalisation
would otherwise clip to finite numbers). An algorithm that runs its own rollout (``checks_steps_by_callback = False``)
calls :func:`check_finite_reset` and :func:`check_finite_step` itself (as :mod:`sb3_grpo.common.groups.collector` does).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ConvertCallback

__all__ = ["check_finite_reset", "check_finite_step", "observation_moment", "with_finite_check"]


def _first_bad_row(value: Any) -> int | None:
    value = np.asarray(value)
    if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.complexfloating)):
        return None
    bad = ~np.isfinite(value.reshape(value.shape[0], -1)).all(axis=1)
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


def _finite(value: Any) -> bool:
    value = np.asarray(value)
    return value.dtype.kind not in "fc" or bool(np.isfinite(value).all())


def _sum_finite(value: Any) -> bool:
    """Fast test: a finite sum means every element is finite. One reduction, no temporary array: this runs every step.
    Smaller floats are summed in float64, which cannot overflow; a float64 sum overflows only for values near 1e308
    (it then says False with numpy's overflow warning, and the exact test that follows finds nothing)."""
    if isinstance(value, np.ndarray) and value.dtype.kind != "c":
        return value.dtype.kind != "f" or math.isfinite(value.sum(dtype=np.float64))
    return _finite(value)


def _observations_finite(observations: Any) -> bool:
    if isinstance(observations, dict):
        return all(_sum_finite(value) for value in observations.values())
    return _sum_finite(observations)


def observation_moment(step: int, new_episode: bool) -> str:
    """Where an observation came from, for messages: a step of its episode, or the reset that began an episode.

    :param step: the step of its episode the env has just taken (0: none yet, the observation is a reset's).
    :param new_episode: the episode ended with this step, so the observation returned with it is the first one of
        the next episode (the VecEnv's automatic reset).
    """
    if step == 0:
        return "from reset(), the first observation of an episode"
    if new_episode:
        return f"from reset(), the first observation of a new episode (after step {step} of the one that ended)"
    return f"at step {step} of its episode"


def check_finite_reset(observations: Any) -> None:
    """Raise a ``ValueError`` naming the env index of the first non-finite observation returned by ``reset()``."""
    if _observations_finite(observations):
        return
    parts = list(observations.items()) if isinstance(observations, dict) else [(None, observations)]
    for key, value in parts:
        row = _first_bad_row(value)
        if row is not None:
            where = "" if key is None else f" (key {key!r})"
            raise ValueError(
                f"Env {row} (its index in the VecEnv) returned a non-finite observation{where} (NaN or inf) "
                f"{observation_moment(0, True)}. Fix the env's reset(), or find the source with SB3's VecCheckNan wrapper."
            )


def check_finite_step(
    observations: Any,
    rewards: np.ndarray,
    infos: list[dict[str, Any]],
    episode_step: np.ndarray,
    dones: np.ndarray | None = None,
) -> None:
    """Raise a ``ValueError`` naming the env index and episode step of the first non-finite reward or observation.

    :param observations: the observations the VecEnv returned (array or dict of arrays, one row per env).
    :param rewards: ``(n_envs,)`` rewards.
    :param infos: the step's infos (their ``terminal_observation`` entries are checked too).
    :param episode_step: ``(n_envs,)`` the step of its episode each env has just taken (1 for the first).
    :param dones: ``(n_envs,)`` the step's dones, if known: only the infos of envs that are done can hold a terminal
        observation, so the infos of the others are not looked at. ``None``: look at every info.
    """
    # The common case (this runs on every env step) costs one reduction per array and no Python loop over envs.
    if _sum_finite(rewards) and _observations_finite(observations):
        if dones is None:
            ended = range(len(infos))
        elif not dones.any():
            return
        else:
            ended = np.flatnonzero(dones).tolist()
        terminals = [(env, infos[env]["terminal_observation"]) for env in ended if "terminal_observation" in infos[env]]
        if all(_observations_finite(terminal) for _, terminal in terminals):
            return
    rewards = np.asarray(rewards)
    bad = ~np.isfinite(rewards) if rewards.dtype.kind in "fc" else np.zeros(rewards.shape, dtype=bool)
    if bad.any():
        env = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"Env {env} (its index in the VecEnv) returned a non-finite reward ({float(rewards[env])}) at step "
            f"{int(episode_step[env])} of its episode. Fix the env (or wrap it to clip or replace such rewards)."
        )
    parts = list(observations.items()) if isinstance(observations, dict) else [(None, observations)]
    for key, value in parts:
        row = _first_bad_row(value)
        if row is not None:
            where = "" if key is None else f" (key {key!r})"
            moment = observation_moment(int(episode_step[row]), dones is not None and bool(dones[row]))
            raise ValueError(
                f"Env {row} (its index in the VecEnv) returned a non-finite observation{where} (NaN or inf) {moment}. "
                "Fix the env, or find the source with SB3's VecCheckNan wrapper."
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
    """Runs :func:`check_finite_step` on every env step of ``collect_rollouts`` (before the step is stored), and
    :func:`check_finite_reset` on the observation ``learn`` starts from.

    It is set up as the model's ``_setup_learn`` creates it, so a custom training loop (``model._setup_learn(...)``,
    then ``model.collect_rollouts(model.env, callback, ...)`` with the callback it returned) is checked as ``learn``
    is.
    """

    def _init_callback(self) -> None:
        model: Any = self.model
        n_envs = self.training_env.num_envs
        steps = getattr(model, "_finite_check_episode_step", None)
        if steps is None or len(steps) != n_envs:
            steps = np.zeros(n_envs, dtype=np.int64)
        starts = model._last_episode_starts
        if starts is not None and len(starts) == n_envs:
            steps = np.where(np.asarray(starts, dtype=bool), 0, steps)
        # Episode step of env i = self._clock - self._episode_start[i]: a Python int ticks every step, the array
        # changes only when an episode ends (numpy calls cost microseconds each on this path).
        self._clock = 0
        self._episode_start = -np.asarray(steps, dtype=np.int64)
        model._finite_check_episode_step = steps
        vec_normalize = model._vec_normalize_env
        first = vec_normalize.old_obs if vec_normalize is not None else model._last_obs
        if first is not None:  # from reset (an observation from a step was checked as it arrived)
            check_finite_reset(first)

    def _episode_steps(self) -> np.ndarray:
        return self._clock - self._episode_start

    def _on_step(self) -> bool:
        self._clock += 1
        step_locals = self.locals
        vec_normalize = self.model._vec_normalize_env
        if vec_normalize is not None:
            # The raw values VecNormalize keeps (get_original_obs()/get_original_reward() return copies).
            observations, rewards = vec_normalize.old_obs, vec_normalize.old_reward
        else:
            observations, rewards = step_locals["new_obs"], step_locals["rewards"]
        dones = np.asarray(step_locals["dones"], dtype=bool)
        if not (_sum_finite(rewards) and _observations_finite(observations) and not dones.any()):
            check_finite_step(observations, rewards, step_locals.get("infos", []), self._episode_steps(), dones)
            self._episode_start[dones] = self._clock
        return True

    def _on_training_end(self) -> None:
        model: Any = self.model
        model._finite_check_episode_step = self._episode_steps()  # carried into the next learn() call


def with_finite_check(callback: Any) -> BaseCallback:
    """``callback`` (as SB3's ``learn`` takes it) behind the check of every env step (the check alone without one:
    SB3 calls every callback on every step)."""
    check: BaseCallback = _FiniteStepCheck()
    if callback is None:
        return check
    if isinstance(callback, list):
        callback = CallbackList(callback)
    if not isinstance(callback, BaseCallback):
        callback = ConvertCallback(callback)
    return CallbackList([check, callback])
