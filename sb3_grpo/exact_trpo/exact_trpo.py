"""ExactTRPO: TRPO whose natural-gradient direction is the exact solution of the damped Fisher system."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib import TRPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, Schedule
from stable_baselines3.common.utils import explained_variance
from torch.nn import functional as F

from sb3_grpo.common.arguments import check_argument_types
from sb3_grpo.common.base_class import AlgorithmMixin
from sb3_grpo.common.schedules import KLAdaptiveLR
from sb3_grpo.exact_trpo.actor import (
    actor_parameters,
    closed_form_fisher_problem,
    has_noise_layers,
    index_obs,
    preserved_buffers,
)
from sb3_grpo.exact_trpo.fisher import FISHER_SOLVERS
from sb3_grpo.exact_trpo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_grpo.exact_trpo.policy_step import (
    AUTO_FISHER_DIRECTIONS,
    AUTO_WHOLE_BATCH_WORK,
    StepSettings,
    policy_step,
    update_running_statistics,
)

__all__ = ["AUTO_FISHER_DIRECTIONS", "AUTO_WHOLE_BATCH_WORK", "KL_ACTION_REDUCTIONS", "ExactTRPO"]


#: ``kl_action_reduction`` choices: how the KL of a factorised action distribution is reduced over action dimensions.
KL_ACTION_REDUCTIONS = ("mean", "sum")


class ExactTRPO(AlgorithmMixin, TRPO):
    """
    Trust Region Policy Optimization with an exact natural-gradient direction.

    sb3-contrib's :class:`~sb3_contrib.TRPO` approximates ``F^-1 g`` with a few conjugate-gradient iterations.
    ExactTRPO forms the Fisher ``F = mean_n J_n^T M_n J_n`` in closed form (Categorical, MultiCategorical,
    Bernoulli, diagonal Gaussian and gSDE policies, see :mod:`sb3_grpo.exact_trpo.fisher`) on the rollout's states (or a random
    subsample of them) and solves ``(c F + cg_damping I) x = g`` exactly by Cholesky (``c F``: the Hessian of the trust
    region's KL, ``c = 1 / d`` for a Gaussian or Bernoulli policy over ``d`` action dimensions whose KL sb3-contrib
    averages over them, see ``kl_action_reduction``; else ``c = 1``), in parameter space or, through
    the Woodbury identity, in sample space, whichever is smaller. When the factorised Fisher is a subsample's, the
    direction is then refined, by conjugate gradients preconditioned with that factorisation and exact matrix-free
    products, to the solution of the whole batch's Fisher system within ``fisher_refine_tol``. The step is ``alpha x`` with
    ``alpha = sqrt(2 target_kl / g^T x)``, followed by a backtracking line search that accepts only a step whose mean
    exact ``KL(pi_old || pi_new)`` is at most ``target_kl`` and that improves the surrogate. The critic is then
    regressed for ``n_critic_updates`` epochs, as in TRPO. Every argument of sb3-contrib's TRPO keeps its meaning, so a
    TRPO configuration ports by changing the algorithm's name. A NaN or inf reward or observation from the env stops
    ``learn`` with an error naming the env's index and the step of its episode.

    Paper: https://arxiv.org/abs/1502.05477

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, ...). The ExactTRPO policies default to
        ``share_features_extractor=False`` (actor and critic each have their own extractor).
        ``share_features_extractor=True`` keeps sb3-contrib's meaning: the shared extractor belongs to the actor, moved
        only by the natural-gradient step (inside the trust region), and the critic's regression updates only the
        critic's own layers (``mlp_extractor``'s value part and ``value_net``).
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: The learning rate for the value function, it can be a function
        of the current progress remaining (from 1 to 0)
    :param n_steps: The number of steps to run for each environment per update
        (i.e. rollout buffer size is n_steps * n_envs where n_envs is number of environment copies running in parallel)
    :param batch_size: Minibatch size for the value function
    :param gamma: Discount factor
    :param cg_max_steps: maximum number of conjugate-gradient iterations, used when the solve falls back to
        conjugate gradients (``fisher_solver="cg"``, or ``"auto"`` above the memory budget or without a closed form)
    :param cg_damping: damping ``lambda`` added to the Hessian ``H`` of the trust region's KL at the old policy:
        ``(H + lambda I) x = g`` (exact and CG solves alike), with ``H = F / d`` or ``F`` (see ``kl_action_reduction``)
    :param line_search_shrinking_factor: step-size reduction factor for the line-search
        (i.e., ``theta_new = theta + alpha^i * step``)
    :param line_search_max_iter: maximum number of iteration for the backtracking line-search
    :param n_critic_updates: number of critic updates (epochs over the rollout) per policy update
    :param gae_lambda: Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param use_sde: Whether to use generalized State Dependent Exploration (gSDE)
        instead of action noise exploration (default: False). gSDE's Fisher is exact as well: at a state the action
        distribution is a diagonal Gaussian whose standard deviation depends on ``log_std`` (and, with
        ``learn_features``, on the network) through the latent features; it takes per-sample Jacobians (no per-layer
        factorisation) and ``2 * action_dim`` Fisher directions per state.
    :param sde_sample_freq: Sample a new noise matrix every n steps when using gSDE
        Default: -1 (only sample at the beginning of the rollout)
    :param rollout_buffer_class: Rollout buffer class to use. If ``None``, an
        :class:`~sb3_grpo.common.buffers.EstimatorRolloutBuffer` (or its Dict variant) is used.
    :param rollout_buffer_kwargs: Keyword arguments to pass to the rollout buffer on creation
    :param normalize_advantage: Whether to normalize or not the advantage
    :param target_kl: the trust-region size ``delta``: the largest mean ``KL(pi_old || pi_new)`` a policy step may have,
        reduced over action dimensions as ``kl_action_reduction`` says.
    :param sub_sampling_factor: Sub-sample the batch (every ``sub_sampling_factor``-th state of the shuffled rollout)
        for the whole policy step (gradient, Fisher and line search), as in sb3-contrib's TRPO
    :param stats_window_size: Window size for the rollout logging, specifying the number of episodes to average
        the reported success rate, mean episode length, and mean reward over
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation
    :param verbose: the verbosity level: 0 no output, 1 info, 2 debug
    :param seed: Seed for the pseudo random generators
    :param device: Device (cpu, cuda, ...) on which the code should be run (the solve runs there too).
        Setting it to auto, the code will be run on the GPU if possible.
    :param fisher_solver: ``"exact"``: always solve exactly (refused for distributions without a closed-form
        Fisher); ``"cg"``: matrix-free conjugate gradients from a zero start (``cg_max_steps`` iterations);
        ``"auto"``: exact when the solve fits in ``fisher_memory_budget``, else conjugate gradients (said in the log).
    :param fisher_subsample: the states on which the Fisher is formed, a random subset of the policy batch drawn
        afresh at every update: ``"auto"`` (as many as keep ``N * k <= 1536`` Fisher directions, ``k`` per state, for
        the exact solve, and, where each direction takes a backward pass over the whole batch of ``B`` states
        (BatchNorm in the actor, or Dropout beside layers other than ``nn.Linear``), ``N * k * B <= 2**19``; all
        states for conjugate gradients),
        ``None`` (all states), an ``int`` (that many states) or a ``float`` in (0, 1] (that fraction of them). The
        gradient and the line search always use the whole batch.
    :param fisher_memory_budget: bytes an exact solve may use before ``fisher_solver="auto"`` switches to
        conjugate gradients.
    :param fisher_refine_tol: when the exact Fisher is factorised on a subsample of the policy batch, the direction is
        refined to the solution of the whole batch's exact Fisher system ``(F_batch + cg_damping I) x = g`` (the Fisher
        of the states the gradient comes from) by preconditioned conjugate gradients: the subsample's exact
        factorisation is the start and the preconditioner, the products with ``F_batch`` are exact and matrix-free,
        and it stops once ``||(F_batch + cg_damping I) x - g|| <= fisher_refine_tol ||g||`` or after ``cg_max_steps``
        iterations (logged: ``train/fisher_residual``, ``train/fisher_refine_steps``). ``None``: no refinement, the
        subsample's exact solution as it is (whose step drifts from the batch's natural gradient as training goes on).
    :param kl_action_reduction: how the KL of a distribution that factorises over ``d`` action dimensions (diagonal
        Gaussian, gSDE, Bernoulli) enters the trust region. ``"mean"`` (default): averaged over the dimensions, as
        sb3-contrib's TRPO does (``kl_divergence(...).mean()``), so ``target_kl`` and ``cg_damping`` mean exactly what
        they mean there and a TRPO config ports unchanged; the KL's Hessian is then ``F / d``. ``"sum"``: the whole
        action distribution's KL, as in the TRPO paper (Hessian ``F``): with the same numbers the trust region is ``d``
        times smaller, and the damping ``d`` times smaller relative to the Fisher. Categorical and MultiCategorical
        KLs are per state (summed over MultiCategorical's components) either way, as in sb3-contrib.
    :param advantage_estimator: a registered advantage estimator's name, class or instance that fits a critic
        algorithm (default ``"gae"``, SB3's GAE bit for bit).
    :param advantage_kwargs: options of the advantage estimator.
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 1e-3,
        n_steps: int = 2048,
        batch_size: int = 128,
        gamma: float = 0.99,
        cg_max_steps: int = 15,
        cg_damping: float = 0.1,
        line_search_shrinking_factor: float = 0.8,
        line_search_max_iter: int = 10,
        n_critic_updates: int = 10,
        gae_lambda: float = 0.95,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        normalize_advantage: bool = True,
        target_kl: float = 0.01,
        sub_sampling_factor: int = 1,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        fisher_solver: str = "auto",
        fisher_subsample: int | float | str | None = "auto",
        fisher_memory_budget: int = 2**30,
        fisher_refine_tol: float | None = 0.01,
        kl_action_reduction: str = "mean",
        advantage_estimator: Any = "gae",
        advantage_kwargs: dict[str, Any] | None = None,
        _init_setup_model: bool = True,
    ):
        check_argument_types(
            "ExactTRPO",
            dict(
                learning_rate=(learning_rate, "schedule"),
                n_steps=(n_steps, "int"),
                batch_size=(batch_size, "int"),
                gamma=(gamma, "float"),
                cg_max_steps=(cg_max_steps, "int"),
                cg_damping=(cg_damping, "float"),
                line_search_shrinking_factor=(line_search_shrinking_factor, "float"),
                line_search_max_iter=(line_search_max_iter, "int"),
                n_critic_updates=(n_critic_updates, "int"),
                gae_lambda=(gae_lambda, "float"),
                sde_sample_freq=(sde_sample_freq, "int"),
                target_kl=(target_kl, "float"),
                sub_sampling_factor=(sub_sampling_factor, "int"),
                stats_window_size=(stats_window_size, "int"),
                fisher_memory_budget=(fisher_memory_budget, "float"),
                fisher_refine_tol=(fisher_refine_tol, "float?"),
            ),
        )
        if batch_size < 1:  # before sb3-contrib's TRPO divides by it
            raise ValueError(f"ExactTRPO: batch_size (the critic's minibatch) must be >= 1, got {batch_size!r}")
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            batch_size=batch_size,
            gamma=gamma,
            cg_max_steps=cg_max_steps,
            cg_damping=cg_damping,
            line_search_shrinking_factor=line_search_shrinking_factor,
            line_search_max_iter=line_search_max_iter,
            n_critic_updates=n_critic_updates,
            gae_lambda=gae_lambda,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            normalize_advantage=normalize_advantage,
            target_kl=target_kl,
            sub_sampling_factor=sub_sampling_factor,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
        )
        self.fisher_solver = fisher_solver
        self.fisher_subsample = fisher_subsample
        self.fisher_memory_budget = fisher_memory_budget
        self.fisher_refine_tol = fisher_refine_tol
        self.kl_action_reduction = kl_action_reduction
        self._finish_init(advantage_estimator, advantage_kwargs, _init_setup_model)

    # ------------------------------------------------------------------ setup

    def _check_arguments(self) -> None:
        fail = self._fail
        self._check_shared_arguments(gradient_clipping=False)  # TRPO clips no gradient
        if isinstance(self.learning_rate, KLAdaptiveLR):
            fail(
                f"learning_rate={self.learning_rate!r} sizes steps by the policy's KL divergence, but ExactTRPO's policy "
                "step is already sized by its KL (target_kl, the trust region) and learning_rate is the critic's. Set "
                "target_kl for the policy and a number or a schedule of the progress as learning_rate."
            )
        self._check_choice("fisher_solver", self.fisher_solver, FISHER_SOLVERS)
        if not self.target_kl > 0:
            fail(f"target_kl (the trust-region size delta) must be > 0, got {self.target_kl!r}")
        if self.fisher_solver != "cg" and not self.cg_damping > 0:
            fail(f"cg_damping must be > 0 for the exact Fisher solve, got {self.cg_damping!r} (or use fisher_solver='cg')")
        if self.cg_damping < 0:
            fail(f"cg_damping must be >= 0, got {self.cg_damping!r}")
        if not 0 < self.line_search_shrinking_factor < 1:
            fail(f"line_search_shrinking_factor must be in (0, 1), got {self.line_search_shrinking_factor!r}")
        if self.line_search_max_iter < 1:
            fail(f"line_search_max_iter must be >= 1, got {self.line_search_max_iter!r}")
        if self.sub_sampling_factor < 1:
            fail(f"sub_sampling_factor must be >= 1, got {self.sub_sampling_factor!r}")
        if self.cg_max_steps < 1:
            fail(f"cg_max_steps must be >= 1, got {self.cg_max_steps!r}")
        if self.n_critic_updates < 1:
            fail(f"n_critic_updates (critic epochs per update) must be >= 1, got {self.n_critic_updates!r}")
        self._warn_batch_size(self.batch_size, f"batch_size (the critic's minibatch, {self.batch_size})")
        self._check_choice("kl_action_reduction", self.kl_action_reduction, KL_ACTION_REDUCTIONS)
        if self.fisher_refine_tol is not None and not 0 < self.fisher_refine_tol < 1:
            fail(f"fisher_refine_tol must be None or in (0, 1), got {self.fisher_refine_tol!r}")
        if not self.fisher_memory_budget > 0:
            fail(f"fisher_memory_budget must be > 0 bytes, got {self.fisher_memory_budget!r}")
        sub = self.fisher_subsample
        ok = (
            sub is None
            or sub == "auto"
            or (isinstance(sub, (int, np.integer)) and not isinstance(sub, bool) and sub >= 1)
            or (isinstance(sub, float) and 0 < sub <= 1)
        )
        if not ok:
            fail(f"fisher_subsample must be 'auto', None, an int >= 1 or a float in (0, 1], got {sub!r}")

    def _setup_model(self) -> None:
        super()._setup_model()  # with the advantage estimator (see AlgorithmMixin)
        self._check_policy()
        if not hasattr(self, "_fisher_rng"):
            # the Fisher's state subsample: reproducible from the seed, saved with the model
            self._fisher_rng = np.random.default_rng(None if self.seed is None else [int(self.seed), 0x7A9])
        self._fallback_reported = False
        self._noise_seed: int | None = None  # the noise layers' seed during a policy step (see train)

    def _check_policy(self) -> None:
        policy = self.policy
        if not isinstance(policy, ActorCriticPolicy):
            raise ValueError(f"ExactTRPO needs an ActorCriticPolicy, got {type(policy).__name__}.")
        problem = closed_form_fisher_problem(policy)
        if problem is not None and self.fisher_solver == "exact":
            raise ValueError(
                f"ExactTRPO: fisher_solver='exact' is impossible: {problem}. Use fisher_solver='auto' or 'cg' "
                "(matrix-free conjugate gradients on the Hessian of the KL)."
            )

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_fallback_reported", "_noise_seed"]

    def _step_settings(self) -> StepSettings:
        """What the policy step reads (see :mod:`sb3_grpo.exact_trpo.policy_step`), from the arguments as they are now."""
        return StepSettings(
            target_kl=self.target_kl,
            cg_damping=self.cg_damping,
            cg_max_steps=self.cg_max_steps,
            line_search_max_iter=self.line_search_max_iter,
            line_search_shrinking_factor=self.line_search_shrinking_factor,
            fisher_solver=self.fisher_solver,
            fisher_subsample=self.fisher_subsample,
            fisher_memory_budget=self.fisher_memory_budget,
            fisher_refine_tol=self.fisher_refine_tol,
            kl_action_reduction=self.kl_action_reduction,
            device=self.device,
            noise_seed=self._noise_seed,
        )

    # ------------------------------------------------------------------ train

    def train(self) -> None:
        """Update the policy (one exact natural-gradient step) and the critic on the current rollout buffer.

        The policy step runs the actor in training mode, as sb3-contrib's TRPO does: BatchNorm normalises with the
        policy batch's statistics (the Fisher includes how each state's output moves with the others through them)
        and Dropout is active, with one set of masks per update, drawn from torch's generator and shared by the
        gradient, the Fisher and every line-search step (sb3-contrib draws new ones at each forward pass), so that
        the Fisher is the Hessian of the KL that the line search measures. BatchNorm's running statistics take one
        update per policy step, from the batch at the accepted parameters; the critic's forward passes update the
        critic's (or a shared extractor's) as in sb3-contrib.
        """
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)

        for rollout_data in self.rollout_buffer.get(batch_size=None):  # one batch: the whole rollout
            step = self.sub_sampling_factor
            obs = index_obs(rollout_data.observations, slice(None, None, step))
            actions = rollout_data.actions[::step]
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.long().flatten()
            advantages = rollout_data.advantages[::step]
            if self.normalize_advantage:
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            self._noise_seed = int(th.randint(2**62, ()).item()) if has_noise_layers(self.policy) else None
            try:
                settings = self._step_settings()
                with preserved_buffers(self.policy):
                    old_log_prob = rollout_data.old_log_prob[::step]
                    stats = policy_step(self.policy, settings, self._fisher_rng, obs, actions, old_log_prob, advantages)
                    actor_ids = {id(p) for _, p in actor_parameters(self.policy, index_obs(obs, slice(0, 2)))}
                update_running_statistics(self.policy, settings, obs)
            finally:
                self._noise_seed = None
            if "fallback" in stats and not self._fallback_reported:  # said once per model
                self.logger.info(f"ExactTRPO: {stats['fallback']}")
                self._fallback_reported = True
            if "no_step" in stats:
                self.logger.info(f"ExactTRPO: {stats['no_step']}")
            break

        value_losses = []
        for _ in range(self.n_critic_updates):
            for rollout_data in self.rollout_buffer.get(self.batch_size):
                values_pred = self.policy.predict_values(rollout_data.observations)
                value_loss = F.mse_loss(rollout_data.returns, values_pred.flatten())
                value_losses.append(value_loss.item())
                self.policy.optimizer.zero_grad()
                value_loss.backward()
                for param in self.policy.parameters():  # the actor only moves inside the trust region
                    if id(param) in actor_ids:
                        param.grad = None
                self.policy.optimizer.step()

        self._n_updates += 1
        explained_var = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())

        self.logger.record("train/policy_objective", stats["policy_objective"])
        self.logger.record("train/value_loss", float(np.mean(value_losses)) if value_losses else float("nan"))
        self.logger.record("train/kl", stats["kl"])
        self.logger.record("train/step_size", stats["step_size"])
        self.logger.record("train/line_search_steps", stats["line_search_steps"])
        self.logger.record("train/is_line_search_success", stats["is_line_search_success"])
        self.logger.record("train/expected_improvement", stats["expected_improvement"])
        self.logger.record("train/surrogate_improvement", stats["surrogate_improvement"])
        self.logger.record("train/fisher_solver", stats["fisher_solver"])
        self.logger.record("train/fisher_states", stats["fisher_states"])
        self.logger.record("train/fisher_refine_steps", stats["fisher_refine_steps"])
        if math.isfinite(stats["fisher_residual"]):
            self.logger.record("train/fisher_residual", stats["fisher_residual"])
        self.logger.record("train/damping", self.cg_damping)
        self.logger.record("train/explained_variance", explained_var)
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
