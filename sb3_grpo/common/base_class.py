"""
What every sb3_grpo algorithm does the same way: :class:`AlgorithmMixin`, mixed in before the SB3 class an
algorithm extends (``class GRPO(AlgorithmMixin, OnPolicyAlgorithm)``).

A new algorithm sets :attr:`AlgorithmMixin.estimator_provides` and writes only its own parts: its arguments (checked
with :meth:`AlgorithmMixin._fail`), its rollout if it differs from SB3's, and ``train`` (the loss of one minibatch,
which :meth:`AlgorithmMixin._train_epochs` runs over PPO's epochs). With SB3's rollout buffer,
``_setup_model`` wires the estimator into it; an algorithm that builds its own batch (GRPO) calls
:meth:`AlgorithmMixin._setup_estimator` from its own ``_setup_model``.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import io
import math
import numbers
import pathlib
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, NoReturn, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.type_aliases import MaybeCallback

from sb3_grpo.common.advantages import check_estimator_needs
from sb3_grpo.common.arguments import (
    ArgumentTypeError,
    check_argument_types,
    check_finite_observation,
    check_policy_kwargs,
    constructor_arguments,
    describe_schedule,
    located,
)
from sb3_grpo.common.buffers import DictEstimatorRolloutBuffer, EstimatorBufferMixin, EstimatorRolloutBuffer
from sb3_grpo.common.callbacks import SwitchArguments, switches_in
from sb3_grpo.common.rollout_checks import with_finite_check
from sb3_grpo.common.save_util import atomic_save, load_checked, raise_if_workers_died
from sb3_grpo.common.saved_models import SAVED_BY_KEY, algorithm_family, saved_by_record
from sb3_grpo.common.schedules import KLAdaptiveLR
from sb3_grpo.common.worker_faults import install_fault_reports
from sb3_grpo.plugins import get_advantage_estimator, registered_advantage_estimators

__all__ = ["CRITIC_PROVIDES", "GROUP_PROVIDES", "AlgorithmMixin", "fitting_estimators", "make_advantage_estimator"]

_Self = TypeVar("_Self", bound="AlgorithmMixin")
_Batch = TypeVar("_Batch")

#: True while SB3's ``load`` builds a model (see :meth:`AlgorithmMixin._setup_lr_schedule`).
_LOADING: contextvars.ContextVar[bool] = contextvars.ContextVar("sb3_grpo_loading", default=False)
#: What a learning rate below 0 does, for the messages that refuse one.
_ASCENT = " (a negative learning rate turns every gradient step into ascent)"


def loading() -> bool:
    """Whether SB3's ``load`` is building a model in this thread (see :meth:`AlgorithmMixin.load`)."""
    return _LOADING.get()


@contextlib.contextmanager
def _loading() -> Iterator[None]:
    token = _LOADING.set(True)
    try:
        yield
    finally:
        _LOADING.reset(token)


#: What an algorithm with a critic hands to advantage estimators (SB3's rollout buffer: values, per-step rewards).
CRITIC_PROVIDES = frozenset({"values", "step_rewards"})
#: What a group algorithm hands to advantage estimators (whole trajectories grouped by their start state, and the
#: policy's score norms where the policy is categorical: see :meth:`AlgorithmMixin._provided_needs`).
GROUP_PROVIDES = frozenset({"outcome_rewards", "group_ids", "step_rewards", "score_norms", "observations"})


def fitting_estimators(provides: frozenset[str]) -> list[str]:
    """Registered estimator names whose (class-level) needs ``provides`` meets."""
    names = []
    for name, obj in registered_advantage_estimators().items():
        requires = getattr(obj, "requires", None)
        if requires is None or isinstance(requires, property) or set(requires) <= set(provides):
            names.append(name)
    return sorted(names)


def make_advantage_estimator(
    algorithm: str,
    advantage_estimator: Any,
    advantage_kwargs: dict[str, Any] | None,
    provides: frozenset[str],
    names: tuple[str, str] = ("advantage_estimator", "advantage_kwargs"),
) -> Any:
    """Resolve, instantiate and check an estimator for an algorithm.

    :param algorithm: the algorithm's name (for messages).
    :param advantage_estimator: a registered name, an estimator class or an instance.
    :param advantage_kwargs: options for the estimator.
    :param provides: what the algorithm provides (:data:`CRITIC_PROVIDES` or :data:`GROUP_PROVIDES`).
    :param names: the constructor arguments of the estimator and its options, for messages.
    :raises sb3_grpo.common.arguments.ArgumentTypeError: for an estimator or options of the wrong type, naming the
        argument.
    :raises sb3_grpo.common.advantages.EstimatorError: if the estimator needs something the algorithm lacks,
        naming both and listing the estimators that fit.
    """
    check_argument_types(
        algorithm,
        {names[0]: (advantage_estimator, "estimator"), names[1]: (advantage_kwargs, "dict?")},
    )
    estimator = get_advantage_estimator(advantage_estimator, **(advantage_kwargs or {}))
    check_estimator_needs(
        estimator, provides, algorithm, f"Estimators that fit {algorithm}: {', '.join(fitting_estimators(provides))}."
    )
    return estimator


class AlgorithmMixin:
    """
    The shared base of every sb3_grpo algorithm (placed before the SB3 base class the algorithm extends).

    - **Advantage estimator**: :meth:`_setup_estimator` resolves ``advantage_estimator`` / ``advantage_kwargs`` at
      construction (unknown names and misfits fail before any env step) and checks it against
      :attr:`estimator_provides`; ``_setup_model`` also wires it into SB3's rollout buffer.
    - **Arguments**: :meth:`_fail` raises the ``ValueError`` every argument check raises, prefixed with the
      algorithm's name; :meth:`_warn_batch_size` warns about a minibatch larger than the rollout. The same checks
      run again on a loaded model (on the saved values and those given to ``load``) and at the start of every
      ``learn`` (an attribute set by hand): an argument is checked whichever way it reached the model.
    - **Schedules**: the remaining progress that schedules see (learning rate, clip range) stays at 0 or above. SB3
      computes ``1 - num_timesteps / total_timesteps``, which goes negative when the last rollout overshoots the
      budget; a linear schedule then gives a *negative* learning rate for the last update, i.e. gradient ascent on
      the loss. GRPO's rollouts run whole groups of episodes, so they overshoot by up to G episodes. Clamped, the
      last update uses the schedule's final value. A schedule's value is checked where it is applied
      (:meth:`_scheduled`): one that turns negative or NaN late is named then.
    - **Saving**: ``save`` writes to a temporary file next to the target and renames it into place only once
      complete (an interrupted save never destroys the previous file; a killed save's leftover goes at the next
      save) and records the class that saved the file
      (see :mod:`sb3_grpo.common.saved_models`). ``load`` turns a truncated or foreign file into a ``ValueError``
      that says what the file is not, refuses a file saved by another algorithm (naming it), and never unpickles
      code of a plugin that is switched off.
    - **Non-finite values**: with SB3's rollout, every env step is checked for NaN and inf before it is stored
      (:mod:`sb3_grpo.common.rollout_checks`), naming the env and the step of its episode.
    - **Dead workers**: ``learn`` turns the broken pipe of a dead SubprocVecEnv worker into a
      :class:`~sb3_grpo.common.worker_faults.WorkerDiedError` that names the worker, says how it ended and how to
      continue.
    """

    #: What the algorithm hands to advantage estimators (a subset of :data:`sb3_grpo.common.advantages.NEEDS`).
    estimator_provides: ClassVar[frozenset[str]] = CRITIC_PROVIDES
    #: The constructor arguments the estimator and its options come from, as messages name them.
    estimator_arguments: ClassVar[tuple[str, str]] = ("advantage_estimator", "advantage_kwargs")
    #: Whether SB3's ``collect_rollouts`` runs (every env step is then checked for NaN and inf by the first callback
    #: of ``learn``); an algorithm with its own rollout checks the steps itself and sets this to ``False``.
    checks_steps_by_callback: ClassVar[bool] = True
    #: The rollout buffer classes of ``rollout_buffer_class=None`` (Box-like observations, Dict observations).
    default_rollout_buffers: ClassVar[tuple[type[RolloutBuffer], type[RolloutBuffer]]] = (
        EstimatorRolloutBuffer,
        DictEstimatorRolloutBuffer,
    )

    # set by SB3's base classes
    policy: Any
    gamma: float
    gae_lambda: float
    n_steps: int
    ent_coef: float
    max_grad_norm: float  # None where an algorithm allows it: no clipping (see _gradient_step)
    n_epochs: int  # where the algorithm has epochs (see _train_epochs)
    _n_updates: int
    verbose: int
    _current_progress_remaining: float
    _total_timesteps: int
    num_timesteps: int
    #: ``num_timesteps`` past which this ``learn`` has run twice its budget (see :meth:`_arm_overshoot_warning`).
    _overshoot_warn_at: int | None = None
    lr_schedule: Callable[[float], float]
    rollout_buffer_class: type[RolloutBuffer] | None
    advantage_estimator: Any
    advantage_kwargs: dict[str, Any] | None
    _estimator: Any

    # ------------------------------------------------------------------ arguments

    @property
    def _algorithm_name(self) -> str:
        return algorithm_family(type(self))

    def _fail(self, message: str) -> NoReturn:
        """Refuse an argument: ``ValueError("<Algorithm>: <message>")``."""
        raise ValueError(f"{self._algorithm_name}: {message}")

    def _check_choice(self, name: str, value: Any, choices: tuple[Any, ...], meaning: str = "") -> None:
        """Refuse ``value`` unless it is one of ``choices``: ``"<name> must be one of <choices><meaning>, got <value>"``
        (``meaning``, e.g. ``" ('sigmoid': DPO, 'ipo': IPO)"``, says what the choices do)."""
        if value not in choices:
            self._fail(f"{name} must be one of {choices}{meaning}, got {value!r}")

    def _finish_init(self, advantage_estimator: Any, advantage_kwargs: dict[str, Any] | None, setup_model: bool) -> None:
        """The end of every constructor: the estimator's arguments, the argument checks, then SB3's set-up."""
        estimator_name, kwargs_name = self.estimator_arguments
        check_argument_types(
            self._algorithm_name,
            {estimator_name: (advantage_estimator, "estimator?"), kwargs_name: (advantage_kwargs, "dict?")},
        )
        self.advantage_estimator = advantage_estimator
        self.advantage_kwargs = advantage_kwargs
        self._check_arguments()
        if setup_model:
            self._setup_model()

    def _check_arguments(self) -> None:
        """Each algorithm checks its arguments here (with :meth:`_check_shared_arguments` and :meth:`_fail`)."""

    def _check_arguments_again(self, where: str) -> None:
        """Run the constructor's checks on the arguments the model holds now, which may have reached it another way
        than through the constructor (``load(path, beta=...)``, ``custom_objects``, ``sb3-grpo-zoo train -i ...
        -params``, an attribute set by hand). Errors only: the warnings were given at construction.

        :param where: how the values reached the model, for the message.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                self._check_arguments()
            except ValueError as exc:
                raise located(exc, where) from None
            except TypeError as exc:
                raise ArgumentTypeError(
                    f"{self._algorithm_name}: an argument {where} has the wrong type ({exc}). Pass numbers as numbers "
                    "(not in quotes) and schedules as callables."
                ) from exc

    def _setup_lr_schedule(self) -> None:
        # SB3's load builds the model without set-up, sets the saved arguments and those given to load (keyword
        # arguments, custom_objects), then calls _setup_model, whose first step this is: the constructor's checks run
        # here, on the values the model will train with, before anything is built from them.
        if _LOADING.get():
            self._check_arguments_again("given to load() or stored in the file")
        super()._setup_lr_schedule()  # type: ignore[misc]

    def _scheduled(
        self, name: str, schedule: Callable[[float], float], given: Any = None, minimum: float | None = 0.0
    ) -> float:
        """The value of the schedule ``name`` at the current remaining progress, checked where it is applied: a
        schedule that turns negative (a learning rate below 0 is gradient ascent) or NaN late in training is named
        then, not reported later as a NaN in the policy.

        :param name: the argument the schedule came from (``"learning_rate"``, ``"clip_range"``, ...).
        :param schedule: the callable of the remaining progress.
        :param given: what the user passed (for the message; default ``schedule``).
        :param minimum: the smallest valid value (``None``: any finite value).
        """
        progress = self._current_progress_remaining
        value = schedule(progress)
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if math.isfinite(number) and (minimum is None or number >= minimum):
            return number
        bound = "a finite number" + ("" if minimum is None else f" >= {minimum:g}")
        ascent = _ASCENT if name == "learning_rate" else ""
        raise ValueError(
            f"{self._algorithm_name}: {name} = {describe_schedule(schedule if given is None else given)} gave {value!r} "
            f"at remaining progress {progress:.4g} (1 at the start of learn(), 0 at its end); {name} must be {bound} "
            f"at every progress in [0, 1]{ascent}. Fix the schedule, e.g. clamp it at its end value."
        )

    def _adapt_learning_rate(self, kl: float) -> None:
        """Hand the KL divergence of the update just made to a :class:`~sb3_grpo.common.schedules.KLAdaptiveLR`
        learning rate (nothing for any other schedule); every algorithm whose ``learning_rate`` steps the policy calls
        it at the end of ``train``."""
        schedule = getattr(self, "learning_rate", None)
        if isinstance(schedule, KLAdaptiveLR):
            schedule.update(kl)

    def _update_learning_rate(self, optimizers: list[th.optim.Optimizer] | th.optim.Optimizer) -> None:
        self._scheduled("learning_rate", self.lr_schedule, getattr(self, "learning_rate", None))
        super()._update_learning_rate(optimizers)  # type: ignore[misc]

    @staticmethod
    def _positive(value: Any) -> bool:
        """Whether ``value`` is a finite real number > 0 (not a bool)."""
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            return False
        number = float(value)
        return math.isfinite(number) and number > 0

    def _check_shared_arguments(self, gradient_clipping: bool = True) -> None:
        """Check the SB3 arguments every algorithm has: ``gamma``, ``gae_lambda``, ``n_steps``, ``n_epochs`` (where
        the algorithm has it), ``ent_coef``, with ``gradient_clipping`` ``max_grad_norm``, and the observation space.
        """
        observation_space = getattr(self, "observation_space", None)
        if observation_space is not None and not isinstance(
            observation_space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Dict)
        ):
            raise NotImplementedError(
                f"{self._algorithm_name}: {observation_space} observation space is not supported (as in SB3, the "
                "observation space must be a Box, Discrete, MultiDiscrete, MultiBinary or Dict). Use a Dict observation "
                "space, or flatten the observation with gymnasium.wrappers.FlattenObservation."
            )
        learning_rate = getattr(self, "learning_rate", 0.0)
        check_argument_types(
            self._algorithm_name,
            dict(learning_rate=(learning_rate, "schedule"), seed=(getattr(self, "seed", None), "int?")),
        )
        if isinstance(learning_rate, numbers.Real) and not (math.isfinite(float(learning_rate)) and float(learning_rate) >= 0):
            ascent = _ASCENT if float(learning_rate) < 0 else ""
            self._fail(f"learning_rate must be a finite number >= 0, got {learning_rate!r}{ascent}")
        window = getattr(self, "_stats_window_size", 100)
        if not (isinstance(window, numbers.Integral) and int(window) >= 1):
            self._fail(
                f"stats_window_size must be an integer >= 1 (the episodes that rollout/ep_rew_mean and "
                f"rollout/ep_len_mean average over), got {window!r}"
            )
        if not 0 <= self.gamma <= 1:
            self._fail(f"gamma (the discount factor) must be in [0, 1], got {self.gamma!r}")
        if not 0 <= self.gae_lambda <= 1:
            self._fail(f"gae_lambda must be in [0, 1], got {self.gae_lambda!r}")
        if self.n_steps < 1:
            self._fail(f"n_steps must be >= 1, got {self.n_steps!r}")
        n_epochs = getattr(self, "n_epochs", 1)
        if not (isinstance(n_epochs, numbers.Integral) and int(n_epochs) >= 1):
            self._fail(f"n_epochs must be an integer >= 1, got {n_epochs!r}")
        if not (isinstance(self.ent_coef, numbers.Real) and float(self.ent_coef) >= 0):
            self._fail(f"ent_coef must be a number >= 0, got {self.ent_coef!r}")
        check_policy_kwargs(self._algorithm_name, getattr(self, "policy_kwargs", None))
        if gradient_clipping and not self._positive(self.max_grad_norm):
            self._fail(
                f"max_grad_norm (the largest gradient norm, clipping) must be a finite number > 0, got "
                f"{self.max_grad_norm!r} (a negative norm turns every gradient step around, 0 stops training)"
            )

    def _arm_overshoot_warning(self, nominal: int) -> None:
        """At the start of ``learn``: warn (once, see :meth:`_check_overshoot`) when the run passes twice the steps
        asked for, or twice ``nominal`` (one rollout, what SB3's PPO would run for a smaller budget), whichever is
        larger. Algorithms whose rollouts run whole episodes can overshoot; only episodes that do not end, or very
        long ones, make them overshoot by that much."""
        requested = self._total_timesteps - self.num_timesteps
        self._overshoot_warn_at = self.num_timesteps + 2 * max(requested, nominal) if requested > 0 else None

    def _check_overshoot(self, rollout_steps: int) -> None:
        """After each VecEnv step: say once per ``learn`` that the run has passed the bound of
        :meth:`_arm_overshoot_warning`, why (:meth:`_overshoot_reason`) and what to change.

        :param rollout_steps: the env steps of the current rollout so far.
        """
        if self._overshoot_warn_at is None or self.num_timesteps <= self._overshoot_warn_at:
            return
        warnings.warn(
            f"{self._algorithm_name}: learn(total_timesteps={self._total_timesteps:,}) will run more than twice the steps "
            f"asked for: this rollout alone has run {rollout_steps:,} env steps so far, because {self._overshoot_reason()}",
            stacklevel=3,
        )
        self._overshoot_warn_at = None

    def _overshoot_reason(self) -> str:
        """Why a rollout of this algorithm runs on, and what to change (the end of :meth:`_check_overshoot`'s warning)."""
        raise NotImplementedError

    def _warn_batch_size(self, batch_size: int, what: str, stacklevel: int = 3) -> None:
        """Warn (SB3's algorithms accept it: rl-zoo configs, samplers) when ``batch_size`` exceeds the rollout.

        :param what: how the message names the minibatch, e.g. ``"batch_size (the critic's minibatch, 256)"``.
        """
        env = getattr(self, "env", None)
        if env is None or batch_size <= self.n_steps * env.num_envs:
            return
        rollout = self.n_steps * env.num_envs
        warnings.warn(
            f"{self._algorithm_name}: {what} is larger than the rollout, n_steps * n_envs = {self.n_steps} * "
            f"{env.num_envs} = {rollout}, so every epoch is one minibatch of the whole rollout: use "
            f"batch_size <= {rollout}, or raise n_steps.",
            stacklevel=stacklevel + 1,
        )

    # ------------------------------------------------------------------ estimator

    def _provided_needs(self) -> frozenset[str]:
        """What this model hands to estimators: :attr:`estimator_provides`, less ``score_norms`` unless the policy is
        categorical (a Discrete action space), the only one whose score norms are defined."""
        provides = self.estimator_provides
        if "score_norms" in provides and not isinstance(getattr(self, "action_space", None), spaces.Discrete):
            provides = provides - {"score_norms"}
        return provides

    def _setup_estimator(self) -> None:
        """Resolve and check the advantage estimator (a loaded model keeps its own, possibly stateful, one)."""
        if getattr(self, "_estimator", None) is None:
            self._estimator = make_advantage_estimator(
                self._algorithm_name,
                self.advantage_estimator,
                self.advantage_kwargs,
                self._provided_needs(),
                self.estimator_arguments,
            )

    def _check_estimator(self) -> None:
        """Refuse an estimator that the model's other arguments do not fit (after :meth:`_setup_estimator`; GRPO's
        reward streams). Nothing to check here."""

    def _setup_model(self) -> None:
        """SB3's set-up, with the estimator resolved first and handed to the rollout buffer SB3 builds.

        ``rollout_buffer_class=None`` gives SB3's rollout buffer whose advantages come from the estimator
        (:attr:`default_rollout_buffers`); another
        buffer computes SB3's GAE itself, which is what ``"gae"`` means, and is refused with any other estimator.
        """
        self._setup_estimator()
        if getattr(self, "rollout_buffer_class", None) is None:
            dict_obs = isinstance(getattr(self, "observation_space", None), spaces.Dict)
            self.rollout_buffer_class = self.default_rollout_buffers[1 if dict_obs else 0]
        super()._setup_model()  # type: ignore[misc]
        buffer = getattr(self, "rollout_buffer", None)
        if isinstance(buffer, EstimatorBufferMixin):
            buffer.estimator = self._estimator
        elif self.advantage_estimator != "gae":
            self._fail(
                f"advantage_estimator={self.advantage_estimator!r} needs a rollout buffer that calls it, but "
                f"rollout_buffer_class={type(buffer).__name__} computes SB3's GAE itself. Use EstimatorRolloutBuffer "
                "(or DictEstimatorRolloutBuffer) from sb3_grpo.common.buffers, or leave rollout_buffer_class=None."
            )

    def _setup_policy(self) -> None:
        """The start of SB3's ``OnPolicyAlgorithm._setup_model``, for an algorithm that keeps its own rollout storage
        and calls it from its ``_setup_model``: the learning-rate schedule (with the argument checks of ``load``),
        the seeds, the policy on its device."""
        model: Any = self  # SB3's base class sets the spaces, the policy's class and arguments, the seed and the device
        self._setup_lr_schedule()
        model.set_random_seed(model.seed)
        self.policy = model.policy_class(
            model.observation_space, model.action_space, self.lr_schedule, use_sde=model.use_sde, **model.policy_kwargs
        )
        self.policy = self.policy.to(model.device)

    # ------------------------------------------------------------------ update

    def _gradient_step(self, loss: th.Tensor) -> th.Tensor | None:
        """One optimiser step on ``loss``, with the gradient clipped to ``max_grad_norm`` (as SB3's PPO; ``None``: not
        clipped).

        :return: the gradient's norm before clipping, a tensor on the policy's device (``None`` when not clipped).
        """
        self.policy.optimizer.zero_grad()
        loss.backward()
        grad_norm = None
        if self.max_grad_norm is not None:
            grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.policy.optimizer.step()
        return grad_norm

    def _train_epochs(
        self,
        minibatches: Callable[[], Iterable[_Batch]],
        minibatch_loss: Callable[[_Batch], tuple[th.Tensor, float | None]],
        target_kl: float | None = None,
    ) -> tuple[th.Tensor, list[th.Tensor]]:
        """The epochs of an update, as SB3's PPO runs them: ``n_epochs`` passes over ``minibatches()``, each
        minibatch's loss followed by PPO's early stop (:meth:`_stops_early`) or a gradient step
        (:meth:`_gradient_step`); ``_n_updates`` counts the epochs run, the one stopped in included.

        :param minibatches: the minibatches of one epoch, called at the start of each (each epoch draws its order).
        :param minibatch_loss: the algorithm's loss of a minibatch (it records its own statistics) and the minibatch's
            approximate KL(pi_old || pi) (``None``: not measured, no early stop).
        :param target_kl: stop the update before the step of a minibatch whose approximate KL exceeds
            ``1.5 * target_kl`` (``None``: never).
        :return: the last minibatch's loss (the one stopped at included; 0 without minibatches) and the gradient norms
            of the steps made, before clipping (none without ``max_grad_norm``).
        """
        loss, grad_norms = th.zeros(()), []
        continue_training = True
        for epoch in range(self.n_epochs):
            for batch in minibatches():
                loss, approx_kl = minibatch_loss(batch)
                if approx_kl is not None and self._stops_early(approx_kl, target_kl, epoch):
                    continue_training = False
                    break
                grad_norm = self._gradient_step(loss)
                if grad_norm is not None:
                    grad_norms.append(grad_norm)
            self._n_updates += 1
            if not continue_training:
                break
        return loss, grad_norms

    def _stops_early(self, approx_kl: float, limit: float | None, epoch: int) -> bool:
        """PPO's early stopping: whether a minibatch's approximate KL exceeds ``1.5 * limit`` (``None``: never)."""
        if limit is None or not approx_kl > 1.5 * limit:
            return False
        if self.verbose >= 1:
            print(f"Early stopping at step {epoch} due to reaching max kl: {approx_kl:.2f}")
        return True

    # ------------------------------------------------------------------ SB3 hooks

    def _update_current_progress_remaining(self, num_timesteps: int, total_timesteps: int) -> None:
        super()._update_current_progress_remaining(num_timesteps, total_timesteps)  # type: ignore[misc]
        self._current_progress_remaining = max(0.0, self._current_progress_remaining)

    def learn(
        self: _Self,
        total_timesteps: int = 100_000,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str | None = None,
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> _Self:
        """Train for ``total_timesteps`` env steps (default 100,000: CartPole-v1 is learnt well within it).

        :param total_timesteps: The total number of samples (env steps) to train on; every env slot's steps count
        :param callback: callback(s) called at every step with state of the algorithm; a
            :class:`~sb3_grpo.SwitchArguments` among them changes the model's arguments partway through.
        :param log_interval: The number of rollouts before logging.
        :param tb_log_name: the name of the run for TensorBoard logging (default: the algorithm's name)
        :param reset_num_timesteps: whether or not to reset the current timestep number (used in logging)
        :param progress_bar: Display a progress bar using tqdm and rich.
        :return: the trained model
        """
        env = getattr(self, "env", None)
        if env is None:
            raise ValueError(
                f"{self._algorithm_name}: this model has no env to learn from (a model loaded without env=): pass "
                f"env=... to {type(self).__name__}.load(), or call model.set_env(env) before learn()."
            )
        self._check_arguments_again("set after construction")
        switches = list(switches_in(callback))
        for switch in switches:
            switch.check(self)
        end = total_timesteps if reset_num_timesteps else self.num_timesteps + total_timesteps
        if not reset_num_timesteps:
            self._switch_arguments([s for s in switches if not s.switched and self.num_timesteps >= s.at])
            total_timesteps = end - self.num_timesteps
        tb_log_name = self._algorithm_name if tb_log_name is None else tb_log_name
        while True:
            self._learn_stage(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
            due = [s for s in switches if s.due]
            if not due:
                return self
            self._switch_arguments(due)
            if self.num_timesteps >= end:
                return self
            total_timesteps, reset_num_timesteps = end - self.num_timesteps, False

    def _learn_stage(
        self,
        total_timesteps: int,
        callback: MaybeCallback,
        log_interval: int,
        tb_log_name: str,
        reset_num_timesteps: bool,
        progress_bar: bool,
    ) -> None:
        """SB3's ``learn``, with a worker that died named as such: one stage of :meth:`learn`."""
        env = self.env  # type: ignore[attr-defined]
        try:
            install_fault_reports(env)
            super().learn(  # type: ignore[misc]
                total_timesteps=total_timesteps,
                callback=callback,
                log_interval=log_interval,
                tb_log_name=tb_log_name,
                reset_num_timesteps=reset_num_timesteps,
                progress_bar=progress_bar,
            )
        except (EOFError, ConnectionError) as exc:  # ConnectionError: BrokenPipeError, ConnectionResetError
            raise_if_workers_died(env, exc)
            raise

    def _switch_arguments(self, switches: list[SwitchArguments]) -> None:
        """Carry out ``switches`` (:class:`~sb3_grpo.common.callbacks.SwitchArguments` whose step has come): save the
        model, load it back with their arguments on the same env and device, and take the loaded model's state in
        place of this one's (the logger kept), so that this object is the loaded model."""
        if not switches:
            return
        arguments: dict[str, Any] = {}
        for switch in switches:
            arguments.update(switch.arguments)
        buffer = io.BytesIO()
        self.save(buffer)
        buffer.seek(0)
        loaded = type(self).load(buffer, env=self.env, device=self.device, **arguments)  # type: ignore[attr-defined]
        kept: dict[str, Any] = {k: self.__dict__[k] for k in ("_logger", "_custom_logger") if k in self.__dict__}
        self.__dict__.clear()
        self.__dict__.update(loaded.__dict__)
        self.__dict__.update(kept)
        for switch in switches:
            switch.due, switch.switched = False, True
            if switch.verbose >= 1:
                print(f"SwitchArguments: at {self.num_timesteps} steps, {type(self).__name__} with {switch.arguments}")

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """SB3's ``predict``, after refusing an observation that holds NaN or inf (naming where), which the policy
        would otherwise turn into an unexplained error of its distribution or a meaningless action."""
        check_finite_observation(self._algorithm_name, observation)
        return super().predict(observation, state, episode_start, deterministic)  # type: ignore[misc]

    def _init_callback(self, callback: MaybeCallback, progress_bar: bool = False) -> BaseCallback:
        if self.checks_steps_by_callback:
            callback = with_finite_check(callback)
        return super()._init_callback(callback, progress_bar)  # type: ignore[misc]

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_finite_check_episode_step", "_overshoot_warn_at"]  # type: ignore[misc]

    def save(self, path: str | pathlib.Path | io.BufferedIOBase, exclude: Any = None, include: Any = None) -> None:
        self.__dict__[SAVED_BY_KEY] = saved_by_record(self)
        try:
            atomic_save(lambda target: super(AlgorithmMixin, self).save(target, exclude=exclude, include=include), path)  # type: ignore[misc]
        finally:
            self.__dict__.pop(SAVED_BY_KEY, None)

    @classmethod
    def load(
        cls,
        path: Any,
        env: Any = None,
        device: Any = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> Any:
        window_given = "stats_window_size" in kwargs
        if window_given:  # SB3 keeps it as _stats_window_size: under its own name it would be set where nothing reads it
            kwargs["_stats_window_size"] = kwargs.pop("stats_window_size")

        def sb3_load(custom: dict[str, Any] | None, data: dict[str, Any] | None) -> Any:
            if data is not None:
                cls._refuse_unknown_load_arguments(kwargs, data)
            rebuild = {"_estimator": None} if cls._estimator_arguments_change(data, kwargs) else {}
            return super(AlgorithmMixin, cls).load(  # type: ignore[misc]
                path,
                env=env,
                device=device,
                custom_objects=custom,
                print_system_info=print_system_info,
                force_reset=force_reset,
                **kwargs,
                **rebuild,  # built again from the arguments given (its saved state belongs to the old one)
            )

        with _loading():
            model = load_checked(cls, path, custom_objects, sb3_load)
        if window_given:  # the saved episode statistics go on in windows of the new size
            for name in ("ep_info_buffer", "ep_success_buffer"):
                if getattr(model, name, None) is not None:
                    setattr(model, name, deque(getattr(model, name), maxlen=model._stats_window_size))
        return model

    @classmethod
    def _refuse_unknown_load_arguments(cls, kwargs: dict[str, Any], data: dict[str, Any]) -> None:
        """SB3's ``load`` sets every keyword argument on the model as an attribute: one that is neither a constructor
        argument nor an attribute saved in the file (``data``), such as a misspelt ``learnig_rate``, would be set
        where nothing reads it and the model would train with the saved value. Refuse it."""
        accepted = constructor_arguments(cls)
        for name in kwargs:
            if name in accepted or name in data:
                continue
            close = difflib.get_close_matches(name, sorted(accepted), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"{cls.__name__}.load() got the keyword argument {name!r}, which {cls.__name__} does not take and the "
                f"file does not store: it would be set where nothing reads it.{hint} The arguments load() can change "
                f"are the constructor's: {', '.join(sorted(accepted))}."
            )

    @classmethod
    def _estimator_arguments_change(cls, data: dict[str, Any] | None, kwargs: dict[str, Any]) -> bool:
        """Whether ``load``'s keyword arguments give an estimator argument (``advantage_estimator``,
        ``advantage_kwargs``, REINFORCE's ``baseline``...) other than the file's (``data``, its saved arguments): the
        saved estimator object was built from the saved arguments and would otherwise be kept, the new ones ignored."""
        given = [name for name in cls.estimator_arguments if name in kwargs]
        if not given or "_estimator" in kwargs:
            return False
        return data is None or any(kwargs[name] != data.get(name) for name in given)
