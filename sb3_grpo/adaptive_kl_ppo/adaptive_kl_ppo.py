"""AdaptiveKLPPO: PPO with an adaptive KL penalty, the PPO paper's second variant (see :class:`AdaptiveKLPPO`)."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, Schedule
from stable_baselines3.common.utils import FloatSchedule, explained_variance
from torch.nn import functional as F

from sb3_grpo.adaptive_kl_ppo.buffers import DictKLRolloutBuffer, KLRolloutBuffer, with_old_distribution
from sb3_grpo.adaptive_kl_ppo.kl_controllers import KL_CONTROLLERS, KLController, make_kl_controller
from sb3_grpo.adaptive_kl_ppo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_grpo.common.arguments import check_argument_types
from sb3_grpo.common.base_class import AlgorithmMixin
from sb3_grpo.common.kl import distribution_parameters, exact_kl, kl_estimate, supports_exact_kl

__all__ = ["KL_ESTIMATOR_CHOICES", "AdaptiveKLPPO", "supports_exact_kl"]


#: The values ``kl_estimator`` accepts.
KL_ESTIMATOR_CHOICES = ("exact", "k1", "k3")

#: Samples per forward pass when the whole batch is evaluated at once (old distributions, KL measurement).
_MIN_EVAL_CHUNK = 1024


class AdaptiveKLPPO(AlgorithmMixin, OnPolicyAlgorithm):
    """
    PPO with an adaptive KL penalty (Schulman et al. 2017, "Proximal Policy Optimization Algorithms", section 4).

    Each minibatch minimises

    ``-mean(r * A) + kl_coef * KL(pi_old || pi_theta) + vf_coef * value_loss - ent_coef * entropy``

    with ``r = pi_theta(a|s) / pi_old(a|s)``; when ``clip_range`` is a number the surrogate is PPO's clipped one,
    ``-mean(min(r * A, clip(r, 1 - eps, 1 + eps) * A))``, and the penalty is added to it (as RLlib does).
    After each policy update (all ``n_epochs``), the mean KL divergence ``d`` between the policy that collected
    the batch and the updated policy is measured over the whole batch and the coefficient ``kl_coef`` (beta) moves
    toward ``target_kl`` by the rule ``kl_adaptation`` (see :mod:`sb3_grpo.adaptive_kl_ppo.kl_controllers`).

    ``model.kl_coef`` always holds the current beta (the one the next update uses). It is saved with the model, so
    ``save`` / ``load`` / ``learn`` continues with the adapted beta. Setting it by hand between calls to ``learn``
    is respected.

    Every PPO argument is accepted with PPO's meaning, so an rl-zoo PPO config ports by changing the algorithm
    name, with one exception: ``target_kl`` **is the KL target of the beta controller here**, not PPO's
    early-stopping threshold; PPO's early stopping is available as ``early_stop_kl``.

    The KL measured for the beta update (logged as ``train/kl``) is the exact, analytic mean
    ``KL(pi_old || pi_new)`` whenever the action distribution has a closed form (Categorical, MultiCategorical,
    Bernoulli, diagonal Gaussian, gSDE: all of SB3's), whichever ``kl_estimator`` the loss uses: a sampled estimate
    would add noise to the controller for no reason. Only for a custom distribution without one is it the k3
    estimate on the batch's actions.

    A NaN or inf reward or observation from the env stops ``learn`` with an error naming the env's index and the
    step of its episode.

    Logged each update: ``train/kl_coef`` (the beta used in this update's loss; ``model.kl_coef`` already holds
    the next one), ``train/kl`` (the measured ``d``), ``train/policy_gradient_loss`` (the surrogate without the
    penalty), ``train/kl_loss`` (mean ``kl_coef * KL`` penalty term), ``train/value_loss``, ``train/entropy_loss``,
    ``train/approx_kl`` (PPO's k3 estimate, last epoch), ``train/explained_variance``, ``train/loss``,
    ``train/clip_fraction`` and ``train/clip_range`` (when clipping), ``train/std`` (Gaussian policies).

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy: SB3's actor-critic policies)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: The learning rate, it can be a function of the current progress remaining (from 1 to 0)
    :param n_steps: The number of steps to run for each environment per update
        (i.e. rollout buffer size is n_steps * n_envs where n_envs is number of environment copies running in parallel)
    :param batch_size: Minibatch size
    :param n_epochs: Number of epochs when optimizing the penalised surrogate loss
    :param gamma: Discount factor
    :param gae_lambda: Factor for trade-off of bias vs variance for Generalized Advantage Estimator
        (read by the ``gae`` advantage estimator)
    :param clip_range: ``None`` (default): no clipping, the pure KL-penalty variant of the PPO paper. A number (or
        a schedule of the progress remaining) also applies PPO's clipped surrogate with this clip range.
    :param clip_range_vf: Clipping parameter for the value function, it can be a function of the current progress
        remaining (from 1 to 0). If None (default), no clipping is done on the value function.
        IMPORTANT: this clipping depends on the reward scaling.
    :param normalize_advantage: Whether to normalize or not the advantage (per minibatch, as PPO)
    :param ent_coef: Entropy coefficient for the loss calculation
    :param vf_coef: Value function coefficient for the loss calculation
    :param max_grad_norm: The maximum value for the gradient clipping
    :param use_sde: Whether to use generalized State Dependent Exploration (gSDE) instead of action noise
        exploration (default: False). gSDE's action distribution at a state is a diagonal Gaussian (variance
        ``latent^2 @ exp(log_std)^2``), so its exact KL is the Gaussian one (see :mod:`sb3_grpo.common.kl`); with
        ``squash_output=True`` too, since squashing both distributions leaves their KL unchanged.
    :param sde_sample_freq: Sample a new noise matrix every n steps when using gSDE
        Default: -1 (only sample at the beginning of the rollout)
    :param rollout_buffer_class: Rollout buffer class to use. If ``None``, a
        :class:`~sb3_grpo.adaptive_kl_ppo.buffers.KLRolloutBuffer` (``DictKLRolloutBuffer`` for Dict observations):
        SB3's buffer with the advantage estimator and the old distributions the exact KL reads. Another SB3 buffer
        class can only be used with the ``gae`` estimator (the buffer is built from a subclass of it that also
        stores the old distributions).
    :param rollout_buffer_kwargs: Keyword arguments to pass to the rollout buffer on creation
    :param target_kl: The KL divergence per update that the beta controller steers toward (> 0, default 0.01, the
        PPO paper's best setting). NOTE: unlike PPO's ``target_kl`` this does not stop the epochs early; see
        ``early_stop_kl``.
    :param kl_coef: The initial KL penalty coefficient beta (>= 0, default 1.0 as in the PPO paper; > 0 unless
        ``kl_adaptation="fixed"``). Afterwards ``model.kl_coef`` holds the adapted value.
    :param kl_estimator: The KL term of the loss: ``"exact"`` (default): the analytic ``KL(pi_old || pi_theta)`` at
        each state, from the old distribution's parameters; ``"k1"``: ``log pi_old(a) - log pi_theta(a)``;
        ``"k3"``: ``r - 1 - log r`` with ``r = pi_theta(a) / pi_old(a)``; the sampled ones use the batch's actions.
        All three have unbiased gradients; the exact one has the least variance.
    :param kl_adaptation: The beta update rule: ``"schulman"`` (default, the PPO paper: halve below
        ``target_kl / 1.5``, double above ``1.5 * target_kl``), ``"proportional"`` (Ziegler et al. 2019, see
        ``kl_horizon``), ``"rllib"`` (x0.5 below ``target_kl / 2``, x1.5 above ``2 * target_kl``) or ``"fixed"``
        (beta never changes).
    :param kl_horizon: Horizon, in env steps, of the ``"proportional"`` controller (default 10,000 as Ziegler et
        al.): per update beta changes by a factor ``1 + clip(d / target_kl - 1, -0.2, 0.2) * n_steps * n_envs /
        kl_horizon``.
    :param kl_coef_min: Lower bound on the adapted beta (default 1e-6, which keeps repeated halving from
        underflowing to 0; the initial ``kl_coef`` must lie within the bounds unless ``kl_adaptation="fixed"``).
    :param kl_coef_max: Upper bound on the adapted beta (default 1e6).
    :param early_stop_kl: PPO's early stopping (PPO's ``target_kl``): stop the epochs of an update once a
        minibatch's k3 estimate of the KL exceeds ``1.5 * early_stop_kl``. ``None`` (default): never stop early.
    :param advantage_estimator: A registered advantage estimator name (default ``"gae"``: SB3's GAE, bitwise),
        an estimator class or an instance; it must need no more than values and per-step rewards.
    :param advantage_kwargs: Keyword arguments for the advantage estimator.
    :param stats_window_size: Window size for the rollout logging, specifying the number of episodes to average
        the reported success rate, mean episode length, and mean reward over
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation (as PPO's)
    :param verbose: Verbosity level: 0 for no output, 1 for info messages (such as device or wrappers used), 2 for
        debug messages
    :param seed: Seed for the pseudo random generators
    :param device: Device (cpu, cuda, ...) on which the code should be run.
        Setting it to auto, the code will be run on the GPU if possible.
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    default_rollout_buffers = (KLRolloutBuffer, DictKLRolloutBuffer)

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 2048,
        batch_size: int = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: float | Schedule | None = None,
        clip_range_vf: float | Schedule | None = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        target_kl: float = 0.01,
        kl_coef: float = 1.0,
        kl_estimator: str = "exact",
        kl_adaptation: str = "schulman",
        kl_horizon: float = 10_000,
        kl_coef_min: float = 1e-6,
        kl_coef_max: float = 1e6,
        early_stop_kl: float | None = None,
        advantage_estimator: Any = "gae",
        advantage_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
    ):
        check_argument_types(
            "AdaptiveKLPPO",
            dict(
                learning_rate=(learning_rate, "schedule"),
                n_steps=(n_steps, "int"),
                batch_size=(batch_size, "int"),
                n_epochs=(n_epochs, "int"),
                gamma=(gamma, "float"),
                gae_lambda=(gae_lambda, "float"),
                clip_range=(clip_range, "schedule?"),
                clip_range_vf=(clip_range_vf, "schedule?"),
                ent_coef=(ent_coef, "float"),
                vf_coef=(vf_coef, "float"),
                max_grad_norm=(max_grad_norm, "float"),
                sde_sample_freq=(sde_sample_freq, "int"),
                target_kl=(target_kl, "float?"),  # None: a message of its own below
                kl_coef=(kl_coef, "float"),
                kl_horizon=(kl_horizon, "float"),
                kl_coef_min=(kl_coef_min, "float"),
                kl_coef_max=(kl_coef_max, "float"),
                early_stop_kl=(early_stop_kl, "float?"),
                stats_window_size=(stats_window_size, "int"),
            ),
        )
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=gae_lambda,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            device=device,
            seed=seed,
            _init_setup_model=False,
            supported_action_spaces=(spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
        )
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.clip_range = clip_range
        self.clip_range_vf = clip_range_vf
        self.normalize_advantage = normalize_advantage
        self.target_kl = target_kl
        self.kl_coef = kl_coef
        self.kl_estimator = kl_estimator
        self.kl_adaptation = kl_adaptation
        self.kl_horizon = kl_horizon
        self.kl_coef_min = kl_coef_min
        self.kl_coef_max = kl_coef_max
        self.early_stop_kl = early_stop_kl
        self._finish_init(advantage_estimator, advantage_kwargs, _init_setup_model)

    # ------------------------------------------------------------------ setup

    def _check_arguments(self) -> None:
        fail, positive = self._fail, self._positive
        self._check_shared_arguments()
        if not (isinstance(self.batch_size, numbers.Integral) and self.batch_size >= 1):
            fail(f"batch_size must be an integer >= 1, got {self.batch_size!r}")
        if self.normalize_advantage and self.batch_size < 2:
            fail("batch_size must be > 1 with normalize_advantage=True (a minibatch of one has no standard deviation)")
        if self.target_kl is None:
            fail(
                "target_kl must be a number > 0: it is the KL target of the beta controller here (PPO's target_kl, "
                "early stopping, is early_stop_kl)"
            )
        if self.kl_estimator not in KL_ESTIMATOR_CHOICES:
            fail(f"unknown kl_estimator {self.kl_estimator!r}; choose one of {KL_ESTIMATOR_CHOICES}")
        if self.kl_adaptation not in KL_CONTROLLERS:
            fail(f"unknown kl_adaptation {self.kl_adaptation!r}; choose one of {sorted(KL_CONTROLLERS)}")
        try:
            self._make_kl_controller()  # checks kl_coef, target_kl, the bounds and kl_horizon
        except ValueError as exc:
            fail(str(exc))
        for name in ("clip_range", "clip_range_vf"):
            value = getattr(self, name)
            if value is not None and not callable(value) and not positive(value):
                fail(f"{name} must be None, a number > 0 or a schedule, got {value!r}")
        if self.early_stop_kl is not None and not positive(self.early_stop_kl):
            fail(f"early_stop_kl must be None or a number > 0, got {self.early_stop_kl!r}")
        if not isinstance(self.vf_coef, numbers.Real) or not float(self.vf_coef) >= 0:
            fail(f"vf_coef must be a number >= 0, got {self.vf_coef!r}")
        if self.env is not None:
            buffer_size = self.env.num_envs * self.n_steps
            if buffer_size < 2 and self.normalize_advantage:
                fail(
                    f"n_steps * n_envs must be > 1 with normalize_advantage=True (got n_steps={self.n_steps}, "
                    f"n_envs={self.env.num_envs}): one sample has no standard deviation."
                )
            self._warn_batch_size(self.batch_size, f"batch_size ({self.batch_size})")
            if self.batch_size < buffer_size and buffer_size % self.batch_size > 0:  # PPO's warning
                warnings.warn(
                    f"You have specified a mini-batch size of {self.batch_size}, but because the rollout buffer is of "
                    f"size n_steps * n_envs = {buffer_size}, after every {buffer_size // self.batch_size} untruncated "
                    f"mini-batches, there will be a truncated mini-batch of size {buffer_size % self.batch_size}. "
                    f"We recommend using a batch_size that is a factor of n_steps * n_envs "
                    f"(n_steps={self.n_steps}, n_envs={self.env.num_envs}).",
                    stacklevel=3,
                )

    def _make_kl_controller(self) -> KLController:
        return make_kl_controller(
            self.kl_adaptation, self.kl_coef, self.target_kl, self.kl_coef_min, self.kl_coef_max, self.kl_horizon
        )

    def _setup_model(self) -> None:
        # The buffer keeps the old distributions (see adaptive_kl_ppo.buffers); a class given without that keeps its
        # name in rollout_buffer_class (saved with the model) while the buffer is built from a subclass that has it.
        given = self.rollout_buffer_class
        if given is not None:
            self.rollout_buffer_class = with_old_distribution(given)
        try:
            super()._setup_model()  # with the advantage estimator (see AlgorithmMixin)
        finally:
            if given is not None:
                self.rollout_buffer_class = given

        if self.clip_range is not None:
            self.clip_range = FloatSchedule(self.clip_range)
        if self.clip_range_vf is not None:
            self.clip_range_vf = FloatSchedule(self.clip_range_vf)

        self._kl_controller = self._make_kl_controller()
        self._exact_kl_available = supports_exact_kl(self.policy.action_dist)
        if self.kl_estimator == "exact" and not self._exact_kl_available:
            raise ValueError(
                f"AdaptiveKLPPO: kl_estimator='exact' needs a closed-form KL, which the action distribution "
                f"{type(self.policy.action_dist).__name__} lacks; use kl_estimator='k3' or 'k1'."
            )

    def _excluded_save_params(self) -> list[str]:
        # The controller is rebuilt from kl_coef (its only state) and its configuration on load.
        return [*super()._excluded_save_params(), "_kl_controller", "_exact_kl_available"]

    # ------------------------------------------------------------------ training

    def _eval_chunks(self, n_samples: int) -> Iterator[tuple[int, Any]]:
        """``(start, samples)`` over the whole (flattened) batch in buffer order, in large chunks."""
        chunk = max(self.batch_size, _MIN_EVAL_CHUNK)
        for start in range(0, n_samples, chunk):
            yield start, self.rollout_buffer._get_samples(np.arange(start, min(start + chunk, n_samples)))

    def _actions(self, rollout_actions: th.Tensor) -> th.Tensor:
        if isinstance(self.action_space, spaces.Discrete):
            return rollout_actions.long().flatten()
        return rollout_actions

    @th.no_grad()
    def _old_distribution_parameters(self) -> th.Tensor:
        """Parameters of the (not yet updated) policy's distribution at every state of the batch, in the order of
        the flattened buffer."""
        buffer: Any = self.rollout_buffer
        chunks = buffer.observation_chunks(max(self.batch_size, _MIN_EVAL_CHUNK))
        return th.cat([distribution_parameters(self.policy.get_distribution(obs)) for obs in chunks])

    @th.no_grad()
    def _measure_kl(self, n_samples: int) -> float:
        """Mean KL(pi_old || pi) over the whole batch: exact from the stored old distributions, else k3 on the
        batch's actions."""
        total = 0.0
        buffer: Any = self.rollout_buffer
        old = buffer.old_distribution
        if old is not None:  # only the observations are read (not every field of the batch)
            chunk = max(self.batch_size, _MIN_EVAL_CHUNK)
            for start, obs in zip(range(0, n_samples, chunk), buffer.observation_chunks(chunk), strict=True):
                total += float(exact_kl(old[start : start + chunk], self.policy.get_distribution(obs)).sum())
            return total / n_samples
        for _, data in self._eval_chunks(n_samples):  # the buffer holds no old distributions: the k3 estimate
            distribution = self.policy.get_distribution(data.observations)
            log_prob = distribution.log_prob(self._actions(data.actions))
            total += float(kl_estimate(log_prob - data.old_log_prob, "k3").sum())
        return total / n_samples

    def train(self) -> None:
        """One policy update on the collected rollout (``n_epochs`` of minibatches), then the beta update."""
        buffer: Any = self.rollout_buffer
        n_samples = buffer.buffer_size * buffer.n_envs
        # The old distributions, with the policy that collected the batch (in eval mode, as during the rollout).
        self.policy.set_training_mode(False)
        if self._exact_kl_available:
            buffer.old_distribution = self._old_distribution_parameters()

        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = None if self.clip_range is None else self._scheduled("clip_range", self.clip_range)  # type: ignore[arg-type]
        clip_range_vf = None if self.clip_range_vf is None else self._scheduled("clip_range_vf", self.clip_range_vf)  # type: ignore[arg-type]
        beta = float(self.kl_coef)

        entropy_losses, pg_losses, value_losses, kl_losses, clip_fractions = [], [], [], [], []
        approx_kl_divs: list[float] = []

        def epoch_minibatches() -> Iterator[Any]:
            approx_kl_divs.clear()  # train/approx_kl is the last epoch's mean, as in SB3's PPO
            return buffer.get(self.batch_size)  # PPO's minibatches

        def minibatch_loss(rollout_data: Any) -> tuple[th.Tensor, float]:
            actions = self._actions(rollout_data.actions)

            values, log_prob, entropy = self.policy.evaluate_actions(rollout_data.observations, actions)
            # evaluate_actions leaves this minibatch's (differentiable) distribution in policy.action_dist.
            distribution = self.policy.action_dist
            values = values.flatten()
            advantages = rollout_data.advantages
            if self.normalize_advantage and len(advantages) > 1:
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

            log_ratio = log_prob - rollout_data.old_log_prob
            ratio = th.exp(log_ratio)
            if clip_range is None:
                policy_loss = -(advantages * ratio).mean()
            else:
                policy_loss_1 = advantages * ratio
                policy_loss_2 = advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range)
                policy_loss = -th.min(policy_loss_1, policy_loss_2).mean()
                clip_fractions.append(th.mean((th.abs(ratio - 1) > clip_range).float()).item())
            pg_losses.append(policy_loss.item())

            if clip_range_vf is None:
                values_pred = values
            else:
                values_pred = rollout_data.old_values + th.clamp(
                    values - rollout_data.old_values, -clip_range_vf, clip_range_vf
                )
            value_loss = F.mse_loss(rollout_data.returns, values_pred)
            value_losses.append(value_loss.item())

            entropy_loss = -th.mean(-log_prob) if entropy is None else -th.mean(entropy)
            entropy_losses.append(entropy_loss.item())

            loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
            if beta > 0:
                if self.kl_estimator == "exact":
                    kl = exact_kl(rollout_data.old_distribution, distribution).mean()
                else:
                    kl = kl_estimate(log_ratio, self.kl_estimator).mean()
                kl_loss = beta * kl
                loss = loss + kl_loss
                kl_losses.append(kl_loss.item())

            # PPO's approximate KL (k3), for logging and for early stopping.
            with th.no_grad():
                approx_kl_div = float(th.mean(th.expm1(log_ratio) - log_ratio))
                approx_kl_divs.append(approx_kl_div)
            return loss, approx_kl_div

        loss, _ = self._train_epochs(epoch_minibatches, minibatch_loss, self.early_stop_kl)

        # The beta update, from the KL the whole update produced (policy as it will act: eval mode).
        self.policy.set_training_mode(False)
        measured_kl = self._measure_kl(n_samples)
        self._kl_controller.kl_coef = beta  # model.kl_coef is authoritative (it may have been set by hand)
        self.kl_coef = self._kl_controller.update(measured_kl, n_steps=n_samples)
        self._adapt_learning_rate(measured_kl)

        explained_var = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())
        self.logger.record("train/kl_coef", beta)
        self.logger.record("train/kl", measured_kl)
        self.logger.record("train/kl_loss", float(np.mean(kl_losses)) if kl_losses else 0.0)
        self.logger.record("train/entropy_loss", float(np.mean(entropy_losses)) if entropy_losses else 0.0)
        self.logger.record("train/policy_gradient_loss", float(np.mean(pg_losses)) if pg_losses else 0.0)
        self.logger.record("train/value_loss", float(np.mean(value_losses)) if value_losses else 0.0)
        self.logger.record("train/approx_kl", float(np.mean(approx_kl_divs)) if approx_kl_divs else 0.0)
        self.logger.record("train/loss", float(loss.item()))
        self.logger.record("train/explained_variance", float(explained_var))
        if clip_range is not None:
            self.logger.record("train/clip_fraction", float(np.mean(clip_fractions)) if clip_fractions else 0.0)
            self.logger.record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
