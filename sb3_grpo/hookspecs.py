"""
Hook specifications of sb3_grpo.

A plugin is any module or object holding functions decorated with :data:`hookimpl` whose names match
the hooks below. Built-in estimators, reward functions and policy losses are registered through these very hooks
(``sb3_grpo/default_plugins/``); third-party distributions declare an entry point in the ``sb3_grpo``
group whose value is the module holding the ``@hookimpl`` functions::

    # pyproject.toml of your distribution
    [project.entry-points.sb3_grpo]
    my_plugin = "my_package.hooks"

Every hook receives a ``register`` callback and returns nothing: the plugin calls ``register(name, obj)``
once per object it provides. Names are what users type in configs, YAML files and on the command line;
they must be unique across all installed plugins: a name two plugins register is unusable (an error naming both
plugins and where each comes from when it is used, a :class:`sb3_grpo.PluginWarning` when plugins load), and every
other name works. A plugin that implements no hook gets a :class:`sb3_grpo.PluginWarning` naming it.

Hooks are called once, lazily, the first time a name is looked up (see :mod:`sb3_grpo.plugins`). An installed
plugin whose hook raises or registers an invalid name or object contributes nothing of that kind: a
:class:`sb3_grpo.PluginWarning` names it, the hook and the error, and every other plugin and name works;
:func:`sb3_grpo.register_plugin` runs the hooks at once and refuses such a plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

__all__ = ["hookimpl", "hookspec"]

#: Marker for hook specifications (used by sb3_grpo itself).
hookspec = pluggy.HookspecMarker("sb3_grpo")
#: Marker for hook implementations (used by plugins): ``@hookimpl def register_reward_functions(register): ...``
hookimpl = pluggy.HookimplMarker("sb3_grpo")


# -------------------------------------------------------------------------
# Advantage estimators
# -------------------------------------------------------------------------


@hookspec
def register_advantage_estimators(register: Callable[[str, Any], None]) -> None:
    """Register advantage estimators.

    Called once per process, the first time an estimator name is looked up or listed
    (:func:`sb3_grpo.get_advantage_estimator`, :func:`sb3_grpo.available_advantage_estimators`,
    or an algorithm constructed with ``advantage_estimator="name"``).

    :param register: call ``register(name, estimator_class)`` for each estimator. ``estimator_class``
        is a subclass of :class:`sb3_grpo.AdvantageEstimator` (or any class, or factory, whose instances
        have a ``requires`` set and a ``compute(inputs)`` method). It is instantiated with the algorithm's
        ``advantage_kwargs``. Its ``requires`` declares what it reads from
        :class:`sb3_grpo.AdvantageInputs`: any of ``"values"`` (a critic), ``"group_ids"``,
        ``"outcome_rewards"``, ``"step_rewards"``, ``"score_norms"`` (a categorical policy's, from GRPO) and
        ``"observations"`` (from GRPO). An algorithm that cannot provide one of them refuses the estimator when it
        is constructed. An instance whose ``accepts_reward_streams`` is true may be used with GRPO's
        ``reward_gammas``: it then finds each reward function's per-step rewards and discount in
        ``inputs.extras["reward_streams"]`` (see :mod:`sb3_grpo.common.advantages`). One whose
        ``scales_reward_streams`` is true scales each stream on its own: GRPO then requires ``reward_gammas`` and
        refuses a stream that is no reward function's (``kl_in_reward``) and weights other than 1 or -1.

    A wrong signature (``compute`` must take exactly one argument) or an unknown need is an error at
    registration time, naming your plugin.

    Example::

        import numpy as np
        from sb3_grpo import AdvantageEstimator, AdvantageOutputs, hookimpl

        class RankAdvantage(AdvantageEstimator):
            requires = frozenset({"outcome_rewards", "group_ids"})

            def compute(self, inputs):
                ranks = np.empty_like(inputs.outcome_rewards)
                for g in np.unique(inputs.group_ids):
                    idx = np.flatnonzero(inputs.group_ids == g)
                    ranks[idx] = np.argsort(np.argsort(inputs.outcome_rewards[idx])) / max(len(idx) - 1, 1) - 0.5
                return AdvantageOutputs(advantages=inputs.broadcast(ranks))

        @hookimpl
        def register_advantage_estimators(register):
            register("rank", RankAdvantage)
    """


# -------------------------------------------------------------------------
# Reward functions
# -------------------------------------------------------------------------


@hookspec
def register_reward_functions(register: Callable[[str, Any], None]) -> None:
    """Register reward functions that score finished trajectories (used by GRPO).

    Called once per process, the first time a reward function name is looked up or listed
    (:func:`sb3_grpo.get_reward_function`, :func:`sb3_grpo.available_reward_functions`, or
    ``GRPO(..., reward_functions=["name", ...])``).

    :param register: call ``register(name, function)`` for each reward function. ``function`` takes one
        argument, a :class:`sb3_grpo.Trajectory` (observations, actions, per-step env rewards, infos,
        terminated/truncated, length), and returns either a float (an outcome reward for the whole
        trajectory) or an array of shape ``(trajectory.length,)`` (per-step rewards, whose sum is the
        outcome). NaN or inf is an error naming the function and the trajectory.

    A function that cannot be called with exactly one positional argument is refused at registration.

    Example::

        from sb3_grpo import hookimpl

        def reached_goal(trajectory):
            return float(trajectory.terminated and trajectory.rewards[-1] > 0)

        @hookimpl
        def register_reward_functions(register):
            register("reached_goal", reached_goal)
    """


# -------------------------------------------------------------------------
# State snapshots (branching groups)
# -------------------------------------------------------------------------


@hookspec
def register_state_snapshots(register: Callable[[str, Any], None]) -> None:
    """Register state snapshotters: objects that save and restore the full state of an env.

    GRPO's branching groups (``branch_every=L``) set every member of a group to the state one member reached
    after ``L`` steps; that needs a snapshot of everything the env's next steps depend on. Called once per
    process, the first time a snapshotter is looked up (``GRPO(..., branch_every=L)`` on a new env).

    :param register: call ``register(name, snapshotter)``. ``snapshotter`` is an object (or a class, which is
        instantiated without arguments) with three methods, each given the slot's outermost env (the one
        ``gymnasium.make`` and SB3's ``Monitor`` built; ``env.unwrapped`` is the core env):

        - ``supports(env) -> bool``: whether it can snapshot this env (the first registered snapshotter that
          answers ``True`` is used);
        - ``get(env) -> state``: a picklable snapshot (it crosses SubprocVecEnv's pipe);
        - ``set(env, state) -> observation``: restore it, right after ``env.reset()``, and return the observation
          of the restored state.

        The built-ins (``classic_control``, ``mujoco``) also restore the episode clock (TimeLimit's elapsed steps)
        with :func:`sb3_grpo.common.snapshots.get_episode_clock` / ``set_episode_clock``.

    Example::

        from sb3_grpo import hookimpl
        from sb3_grpo.common.snapshots import StateSnapshotter, get_episode_clock, set_episode_clock

        class GridWorldSnapshot(StateSnapshotter):
            def supports(self, env):
                return type(env.unwrapped).__name__ == "GridWorldEnv"

            def get(self, env):
                return {"pos": env.unwrapped.pos.copy(), "clock": get_episode_clock(env)}

            def set(self, env, state):
                env.unwrapped.pos = state["pos"].copy()
                set_episode_clock(env, state["clock"])
                return env.unwrapped.observe()

        @hookimpl
        def register_state_snapshots(register):
            register("grid_world", GridWorldSnapshot)
    """


# -------------------------------------------------------------------------
# Policy losses
# -------------------------------------------------------------------------


@hookspec
def register_policy_losses(register: Callable[[str, Any], None]) -> None:
    """Register policy losses: GRPO's per-step objective (``GRPO(..., policy_loss="name")``).

    Called once per process, the first time a policy loss name is looked up or listed
    (:func:`sb3_grpo.get_policy_loss`, :func:`sb3_grpo.available_policy_losses`, or GRPO constructed with a name).

    :param register: call ``register(name, loss_class)`` for each loss. ``loss_class`` is a subclass of
        :class:`sb3_grpo.PolicyLoss` (or any class, or factory, whose instances have a ``compute(inputs)`` method and a
        boolean ``by_trajectory``). It is instantiated with GRPO's ``policy_loss_kwargs``. ``compute`` receives the
        minibatch as :class:`sb3_grpo.PolicyLossInputs` (the differentiable log-probabilities, the behaviour and
        reference log-probabilities, the advantages, the aggregation weights, each step's trajectory, the clip ranges
        of this update, the entropy) and returns :class:`sb3_grpo.PolicyLossOutputs`: the loss of every step (GRPO
        minimises ``sum(weights * per_step)`` and adds its KL penalty and entropy bonus), the probability ratios its
        clip diagnostics read, and statistics of its own, logged as ``train/<name>``. ``by_trajectory = True`` makes
        minibatches keep whole trajectories (for trajectory-level ratios).

    A wrong signature (``compute`` must take exactly one argument), an abstract class or a ``by_trajectory`` that is
    not a bool is an error at registration time, naming your plugin.

    Example::

        import torch as th
        from sb3_grpo import PolicyLoss, PolicyLossOutputs, hookimpl

        class TruncatedPG(PolicyLoss):
            # -min(r, cap) A per step: the ratio capped at cap, no lower clip

            def __init__(self, cap: float = 2.0):
                self.cap = cap

            def compute(self, inputs):
                ratio = th.exp(inputs.log_prob - inputs.old_log_prob)
                per_step = -th.clamp(ratio, max=self.cap) * inputs.advantages
                capped = float((ratio > self.cap).float().mean())
                return PolicyLossOutputs(per_step=per_step, ratio=ratio, stats={"cap_fraction": capped})

        @hookimpl
        def register_policy_losses(register):
            register("truncated_pg", TruncatedPG)
    """
