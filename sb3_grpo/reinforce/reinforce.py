"""REINFORCE with a baseline: the vanilla policy gradient, as an SB3 on-policy algorithm."""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from sb3_grpo.common.advantages import reward_to_go
from sb3_grpo.common.arguments import check_argument_types
from sb3_grpo.common.base_class import AlgorithmMixin, fitting_estimators, make_advantage_estimator
from sb3_grpo.common.buffers import minibatch_bounds
from sb3_grpo.common.kl import kl_estimate
from sb3_grpo.common.policies import ActorPolicy, CnnPolicy, MlpPolicy, MultiInputPolicy, env_actions
from sb3_grpo.common.schedules import KLAdaptiveLR
from sb3_grpo.plugins import registered_advantage_estimators
from sb3_grpo.reinforce.baselines import BASELINES, RewardToGoBaseline
from sb3_grpo.reinforce.episodes import EPISODE_PROVIDES, EpisodeBuffer, episode_batch

__all__ = ["BASELINES", "EPISODE_PROVIDES", "REINFORCE", "EpisodeBuffer", "RewardToGoBaseline", "reward_to_go"]


class REINFORCE(AlgorithmMixin, OnPolicyAlgorithm):
    """
    REINFORCE with a baseline (Williams 1992): the policy gradient ``E[sum_t grad log pi(a_t|s_t) (G_t - b_t)]`` with
    the reward-to-go ``G_t = sum_{k >= t} gamma^(k-t) r_k`` and a baseline ``b_t`` that needs no critic. One gradient
    step per rollout by default, no ratio clipping, no reference policy: the first member of the family that PPO
    and GRPO extend (GRPO replaces ``b`` by the mean over a group started from the same state).

    A rollout runs ``n_steps`` steps in every env slot, and on until at least one episode has ended (so that every
    update has a batch: with episodes longer than ``n_steps`` a rollout runs to the end of the first one, and
    ``learn`` may run past ``total_timesteps`` by the rest of that episode). Only whole episodes enter an update: an
    episode still running when the rollout ends is carried over and enters the update of the rollout in which it ends
    (so its first steps were sampled by a policy one or more updates older; every step is used once). An episode cut
    by a time limit counts as ended there: nothing is bootstrapped (there is no critic).

    Baselines (built-in ones: ``b`` is one number per update, the same for every step):

    - ``"moving_average"`` (default): an exponential moving average of past batches' mean reward-to-go:
      ``b_k = baseline_decay * b_{k-1} + (1 - baseline_decay) * mean_k(G)`` updated *after* batch ``k`` used
      ``b_{k-1}`` (the first batch uses its own mean). Saved with the model.
    - ``"batch_mean"``: the mean reward-to-go over the steps of this batch.
    - ``"none"``: ``b = 0`` (plain REINFORCE).
    - any registered advantage estimator that needs no more than per-step rewards and one outcome reward per
      episode (e.g. ``"reinforce_baseline"``: the episode's return minus a moving average, on every step), with
      ``baseline_kwargs`` as its options. An estimator that needs a critic or groups is refused, naming those
      that fit.

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``): actor only, the classes
        of :mod:`sb3_grpo.common.policies` (GRPO's).
    :param env: the environment (a registered id, a Gymnasium env or any VecEnv). Episodes must end.
    :param learning_rate: learning rate, a constant or a schedule of the remaining progress (1 to 0).
    :param n_steps: steps per env slot per rollout (more if no episode has ended by then, see above).
    :param batch_size: minibatch size in steps (``None``: the whole batch, one gradient step per epoch); the last
        minibatch of an epoch holds the rest, and a rest of one step joins the minibatch before it.
    :param n_epochs: passes over each batch (1: the textbook one gradient step per rollout).
    :param gamma: discount factor of the reward-to-go.
    :param baseline: ``"moving_average"``, ``"batch_mean"``, ``"none"`` or a registered estimator (see above).
    :param baseline_decay: weight of the old value in the moving average (``baseline="moving_average"``).
    :param baseline_kwargs: options of a registered estimator given as ``baseline`` (``None`` for the built-ins).
    :param normalize_advantage: divide ``G_t - b_t`` by its standard deviation over the batch.
    :param ent_coef: entropy bonus coefficient.
    :param max_grad_norm: clip the gradient's norm to this (``None``, default: never; REINFORCE clips nothing).
    :param use_sde: generalised state-dependent exploration (Box actions), as in SB3.
    :param sde_sample_freq: with gSDE, new noise every ``sde_sample_freq`` steps (``-1``: once per rollout).
    :param max_episode_length: an episode longer than this raises an error (an env that never ends).
    :param stats_window_size: window size for the rollout logging (episodes).
    :param tensorboard_log: the log location for tensorboard (``None``: no logging).
    :param policy_kwargs: additional arguments passed to the policy on creation.
    :param verbose: 0 no output, 1 info messages, 2 debug messages.
    :param seed: seed of the pseudo random generators.
    :param device: device (cpu, cuda, ...) on which the code runs; ``"auto"`` picks the GPU if there is one.
    :param _init_setup_model: whether or not to build the network at the creation of the instance.
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    estimator_provides = EPISODE_PROVIDES
    estimator_arguments = ("baseline", "baseline_kwargs")
    policy: ActorPolicy  # type: ignore[assignment]
    rollout_buffer: EpisodeBuffer  # type: ignore[assignment]

    def __init__(
        self,
        policy: str | type[ActorPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 1e-3,
        n_steps: int = 512,
        batch_size: int | None = None,
        n_epochs: int = 1,
        gamma: float = 0.99,
        baseline: Any = "moving_average",
        baseline_decay: float = 0.9,
        baseline_kwargs: dict[str, Any] | None = None,
        normalize_advantage: bool = False,
        ent_coef: float = 0.0,
        max_grad_norm: float | None = None,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        max_episode_length: int = 100_000,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
    ):
        check_argument_types(
            "REINFORCE",
            dict(
                learning_rate=(learning_rate, "schedule"),
                n_steps=(n_steps, "int"),
                batch_size=(batch_size, "int?"),
                n_epochs=(n_epochs, "int"),
                gamma=(gamma, "float"),
                baseline_decay=(baseline_decay, "float"),
                ent_coef=(ent_coef, "float"),
                max_grad_norm=(max_grad_norm, "float?"),
                sde_sample_freq=(sde_sample_freq, "int"),
                max_episode_length=(max_episode_length, "int"),
                stats_window_size=(stats_window_size, "int"),
            ),
        )
        super().__init__(
            policy,  # type: ignore[arg-type]  # SB3 types on-policy policies as ActorCriticPolicy; this one is actor only
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=1.0,  # not used: reward-to-go, no critic
            ent_coef=ent_coef,
            vf_coef=0.0,  # not used: no value function
            max_grad_norm=max_grad_norm,  # type: ignore[arg-type]  # None: no clipping
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
            supported_action_spaces=(spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
        )
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.baseline = baseline
        self.baseline_decay = baseline_decay
        self.baseline_kwargs = baseline_kwargs
        self.normalize_advantage = normalize_advantage
        self.max_episode_length = max_episode_length
        self._finish_init(baseline, baseline_kwargs, _init_setup_model)

    # ------------------------------------------------------------------ setup

    def _check_arguments(self) -> None:
        fail = self._fail
        self._check_shared_arguments(gradient_clipping=False)
        if self.batch_size is not None and self.batch_size < 1:
            fail(f"batch_size must be None (the whole batch) or an integer >= 1, got {self.batch_size!r}")
        if self.max_grad_norm is not None and not self._positive(self.max_grad_norm):
            fail(f"max_grad_norm must be None (no clipping) or a finite number > 0, got {self.max_grad_norm!r}")
        if not (isinstance(self.baseline_decay, numbers.Real) and 0.0 <= self.baseline_decay < 1.0):
            fail(f"baseline_decay must be in [0, 1), got {self.baseline_decay!r}")
        if self.max_episode_length < 1:
            fail(f"max_episode_length must be >= 1, got {self.max_episode_length!r}")
        if not (self.sde_sample_freq == -1 or self.sde_sample_freq > 0):
            fail(f"sde_sample_freq must be -1 (once per rollout) or a number of steps > 0, got {self.sde_sample_freq!r}")
        if isinstance(self.baseline, str) and self.baseline in BASELINES and self.baseline_kwargs:
            fail(
                f"baseline_kwargs={self.baseline_kwargs!r} are options of a registered estimator, but "
                f"baseline={self.baseline!r} is built in (its only option is baseline_decay): drop baseline_kwargs."
            )
        if self.batch_size is not None:
            self._warn_batch_size(self.batch_size, f"batch_size ({self.batch_size})")

    def _setup_estimator(self) -> None:
        """The built-in baselines, or a registered estimator checked against :data:`EPISODE_PROVIDES` (a loaded model
        keeps its own, with the moving average it had reached, and the ``baseline_decay`` it is given)."""
        if getattr(self, "_estimator", None) is not None:
            if isinstance(self._estimator, RewardToGoBaseline):
                self._estimator.decay = self.baseline_decay  # load(path, baseline_decay=...) goes on from the average
            return
        if isinstance(self.baseline, str) and self.baseline in BASELINES:
            self._estimator = RewardToGoBaseline(self.baseline, self.baseline_decay)
        else:
            if isinstance(self.baseline, str) and self.baseline not in registered_advantage_estimators():
                self._fail(
                    f"unknown baseline {self.baseline!r}: use one of {', '.join(BASELINES)} or a registered advantage "
                    f"estimator that fits REINFORCE ({', '.join(fitting_estimators(self.estimator_provides))})"
                )
            self._estimator = make_advantage_estimator(
                self._algorithm_name,
                self.baseline,
                self.baseline_kwargs,
                self.estimator_provides,
                names=self.estimator_arguments,
            )

    def _setup_model(self) -> None:
        self._setup_policy()
        self._setup_estimator()
        self.rollout_buffer = EpisodeBuffer(self.n_envs, self.max_episode_length)

    @property
    def baseline_value(self) -> float | None:
        """The moving-average baseline the next batch uses (``None`` before the first batch or for other baselines)."""
        return getattr(self._estimator, "baseline_value", None)

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        return ["policy", "policy.optimizer"], []

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        env_reset = reset_num_timesteps or self._last_obs is None  # SB3 resets the env exactly then
        result = super()._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)
        buffer = getattr(self, "rollout_buffer", None)
        if not isinstance(buffer, EpisodeBuffer):
            self.rollout_buffer = EpisodeBuffer(self.n_envs, self.max_episode_length)
        elif env_reset or len(buffer.running) != self.n_envs:
            buffer.reset(self.n_envs)
        self._arm_overshoot_warning(self.n_steps * self.n_envs)  # only episodes that do not end get there
        return result

    def _overshoot_reason(self) -> str:
        return (
            f"a rollout runs n_steps={self.n_steps} steps in every env and then on until an episode has ended, and no "
            f"episode has ended yet. (An episode longer than max_episode_length={self.max_episode_length:,} steps "
            "raises.) REINFORCE needs whole episodes: for an env whose episodes do not end by themselves, bound them "
            "with gymnasium.wrappers.TimeLimit (or max_episode_steps= in gymnasium.make); or raise total_timesteps."
        )

    # ------------------------------------------------------------------ rollouts

    def collect_rollouts(  # type: ignore[override]
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: EpisodeBuffer,
        n_rollout_steps: int,
    ) -> bool:
        """Run ``n_rollout_steps`` steps in every slot, then on until an episode has ended; the episodes that ended
        form the batch of the next update.

        :return: ``False`` if a callback asked to stop training.
        """
        assert self._last_obs is not None, "No previous observation was provided"
        self.policy.set_training_mode(False)
        rollout_buffer.full = False
        rollout_buffer.batch = None
        if self.use_sde:
            self.policy.reset_noise(env.num_envs)
        callback.on_rollout_start()
        n_steps = 0
        while n_steps < n_rollout_steps or not rollout_buffer.finished:  # the episode length bounds it (see add)
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self.policy.reset_noise(env.num_envs)
            with th.inference_mode():  # the values no_grad gives, with less bookkeeping
                actions_t, _ = self.policy(obs_as_tensor(self._last_obs, self.device))  # type: ignore[arg-type]
            actions = actions_t.cpu().numpy()
            clipped_actions = env_actions(self.policy, actions)
            new_obs, rewards, dones, infos = env.step(clipped_actions)
            self.num_timesteps += env.num_envs
            self._check_overshoot((n_steps + 1) * env.num_envs)
            # The first callback of learn() checks new_obs and rewards for NaN and inf (see AlgorithmMixin).
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            rollout_buffer.add(self._last_obs, actions, rewards, dones, infos)
            self._last_obs = new_obs  # type: ignore[assignment]
            self._last_episode_starts = dones
            n_steps += 1
        rollout_buffer.batch = episode_batch(
            rollout_buffer.pop_finished(), self.gamma, self._estimator, self.normalize_advantage, self.observation_space
        )
        rollout_buffer.full = True
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    # ------------------------------------------------------------------ update

    def train(self) -> None:
        """One update on the episodes that ended in the last rollout: ``n_epochs`` passes, ``batch_size`` steps each."""
        batch = self.rollout_buffer.batch
        if batch is None:  # no rollout yet (or one stopped by a callback): nothing to learn from
            self.logger.record("train/n_episodes", 0)
            return
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        obs = obs_as_tensor(batch["obs"], self.device)
        actions = th.as_tensor(batch["actions"], device=self.device)
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()
        elif isinstance(self.action_space, spaces.Box):  # flat, as SB3's RolloutBuffer: the Gaussian's event shape
            actions = actions.float().reshape(len(actions), -1)
        advantages = th.as_tensor(batch["advantages"], dtype=th.float32, device=self.device)
        n_samples = len(advantages)
        batch_size = n_samples if self.batch_size is None else min(self.batch_size, n_samples)
        pg_losses, entropy_losses = [], []
        # The log-probabilities under the policy before this update (the rollout policy), for the update's KL when a
        # KLAdaptiveLR learning rate asks for it.
        measure_kl = isinstance(self.learning_rate, KLAdaptiveLR)
        if measure_kl:
            with th.no_grad():
                old_log_prob, _ = self.policy.evaluate_actions(obs, actions)

        def epoch_minibatches() -> Iterator[th.Tensor]:
            order = th.randperm(n_samples, device=self.device) if batch_size < n_samples else th.arange(n_samples)
            return (order[start:end] for start, end in minibatch_bounds(n_samples, batch_size))

        def minibatch_loss(idx: th.Tensor) -> tuple[th.Tensor, None]:
            mb_obs = {k: v[idx] for k, v in obs.items()} if isinstance(obs, dict) else obs[idx]
            log_prob, entropy = self.policy.evaluate_actions(mb_obs, actions[idx])
            pg_loss = -(log_prob * advantages[idx]).mean()
            entropy_loss = -th.mean(entropy) if entropy is not None else th.mean(log_prob)
            pg_losses.append(pg_loss.item())
            entropy_losses.append(entropy_loss.item())
            return pg_loss + self.ent_coef * entropy_loss, None  # no early stop: REINFORCE has no target_kl

        loss, grad_norms = self._train_epochs(epoch_minibatches, minibatch_loss)  # no norms with max_grad_norm=None
        if measure_kl:
            with th.no_grad():
                log_prob, _ = self.policy.evaluate_actions(obs, actions)
                kl = float(kl_estimate(log_prob - old_log_prob, "k3").mean())
            self.logger.record("train/approx_kl", kl)
            self._adapt_learning_rate(kl)

        self.logger.record("train/policy_gradient_loss", float(np.mean(pg_losses)))
        self.logger.record("train/entropy_loss", float(np.mean(entropy_losses)))
        self.logger.record("train/loss", float(loss.item()))
        self.logger.record("train/baseline", batch["baseline"])
        self.logger.record("train/return_mean", float(np.mean(batch["returns"])))
        self.logger.record("train/n_episodes", batch["n_episodes"])
        self.logger.record("train/n_samples", n_samples)
        if grad_norms:
            self.logger.record("train/grad_norm", float(np.mean([float(norm) for norm in grad_norms])))
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
