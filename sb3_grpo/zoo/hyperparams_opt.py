"""
Optuna search spaces (samplers) and their converters for rl-zoo's ``-optimize`` / ``--trial-id``.

rl_zoo3 calls a sampler as ``sampler(trial, n_actions, n_envs, additional_args)`` and uses the returned dict as
constructor arguments. With ``--trial-id`` (or when a study is reloaded) it calls the converter on the trial's
*raw* Optuna parameters (``study.trials[i].params``) to get the same constructor arguments back. So every sampler
here only suggests the raw parameters of its search space and returns ``CONVERTER(raw)``: what a trial trained
with and what ``--trial-id`` retrains with are one function of the stored parameters.

A search space is a table, raw parameter name -> Optuna distribution (``GRPO_SPACE``, ...), suggested in its order
(the order a seeded sampler draws them in); the entries several algorithms search alike are written once.

Raw parameter conventions follow rl_zoo3's: ``one_minus_gamma`` / ``one_minus_gae_lambda`` (searched on a log
scale), ``n_steps_pow`` / ``batch_size_pow`` (powers of two), ``net_arch`` and ``activation_fn`` as names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from torch import nn

__all__ = [
    "ADAPTIVE_KL_PPO_SPACE",
    "EXACT_TRPO_SPACE",
    "GRPO_SPACE",
    "HYPERPARAMS_CONVERTER",
    "HYPERPARAMS_SAMPLER",
    "ONLINE_DPO_SPACE",
    "REINFORCE_SPACE",
    "convert_adaptive_kl_ppo_params",
    "convert_exact_trpo_params",
    "convert_grpo_params",
    "convert_online_dpo_params",
    "convert_reinforce_params",
    "sample_adaptive_kl_ppo_params",
    "sample_exact_trpo_params",
    "sample_grpo_params",
    "sample_online_dpo_params",
    "sample_reinforce_params",
    "suggest",
]

#: Hidden layers per network-size name. Actor-critic algorithms get ``dict(pi=..., vf=...)``, GRPO (actor only)
#: a plain list.
NET_ARCHS: dict[str, list[int]] = {"tiny": [64], "small": [64, 64], "medium": [256, 256]}

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU}

#: GRPO's advantage estimators that the search tries (all three compare a trajectory with its group).
GRPO_ESTIMATORS = ("group_zscore", "leave_one_out", "group_step_baseline")

#: REINFORCE's baselines that the search tries (the built-ins and the registered estimator that fits).
REINFORCE_BASELINES = ("moving_average", "batch_mean", "none", "reinforce_baseline")


def _convert_common(sampled_params: dict[str, Any], actor_critic: bool) -> dict[str, Any]:
    """Undo rl_zoo3's raw encodings (``one_minus_*``, ``*_pow``, network names) into constructor arguments."""
    hyperparams = dict(sampled_params)
    for name in ("gamma", "gae_lambda"):
        raw = hyperparams.pop(f"one_minus_{name}", None)
        if raw is not None:
            hyperparams[name] = 1.0 - raw
    for name in ("batch_size", "n_steps"):
        raw = hyperparams.pop(f"{name}_pow", None)
        if raw is not None:
            hyperparams[name] = 2**raw
    policy_kwargs: dict[str, Any] = {}
    net_arch = hyperparams.pop("net_arch", None)
    if net_arch is not None:
        layers = NET_ARCHS[net_arch]
        policy_kwargs["net_arch"] = {"pi": list(layers), "vf": list(layers)} if actor_critic else list(layers)
    activation = hyperparams.pop("activation_fn", None)
    if activation is not None:
        policy_kwargs["activation_fn"] = ACTIVATIONS[activation]
    if policy_kwargs:
        hyperparams["policy_kwargs"] = policy_kwargs
    return hyperparams


def _display(trial: optuna.Trial, hyperparams: dict[str, Any]) -> None:
    """Record the decoded values as user attributes (shown in rl_zoo3's report next to the raw ones)."""
    for key in ("gamma", "gae_lambda", "n_steps", "batch_size", "clip_range_high"):
        if key in hyperparams:
            trial.set_user_attr(key, hyperparams[key])


def suggest(trial: optuna.Trial, space: dict[str, BaseDistribution]) -> dict[str, Any]:
    """Suggest each raw parameter of ``space`` (name -> Optuna distribution) in the table's order.

    :return: the raw parameters, name -> value, as ``trial.params`` stores them.
    """
    raw: dict[str, Any] = {}
    for name, dist in space.items():
        if isinstance(dist, CategoricalDistribution):
            raw[name] = trial.suggest_categorical(name, list(dist.choices))
        elif isinstance(dist, IntDistribution):
            raw[name] = trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
        elif isinstance(dist, FloatDistribution):
            raw[name] = trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)
        else:
            raise TypeError(f"{name}: no suggestion for a {type(dist).__name__} (a categorical, int or float one)")
    return raw


def _sample(
    trial: optuna.Trial, space: dict[str, BaseDistribution], convert: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """A sampler's body: suggest the raw parameters, convert them into constructor arguments, show the decoded ones."""
    hyperparams = convert(suggest(trial, space))
    _display(trial, hyperparams)
    return hyperparams


def _log_uniform(low: float, high: float) -> FloatDistribution:
    """A float searched on a log scale."""
    return FloatDistribution(low, high, log=True)


# ------------------------------------------------------------------------------------- entries several spaces share
#: The network, last in every space (ExactTRPO's leaves out "tiny").
NETWORK: dict[str, BaseDistribution] = {
    "net_arch": CategoricalDistribution(["tiny", "small", "medium"]),
    "activation_fn": CategoricalDistribution(["tanh", "relu"]),
}

#: GRPO's and OnlineDPO's groups and rollout size: 2**5 = 32 to 2**11 = 2048 steps per env slot per rollout.
GROUP_ROLLOUT: dict[str, BaseDistribution] = {
    "group_size": CategoricalDistribution([2, 4, 8, 16]),
    "n_steps_pow": IntDistribution(5, 11),
}

#: ExactTRPO's and AdaptiveKLPPO's rollout (2**5 = 32 to 2**12 = 4096 steps per env), (critic) minibatch
#: (2**5 = 32 to 2**10 = 1024), GAE, discount and learning rate (ExactTRPO's critic's: its actor step is the
#: natural-gradient step).
ACTOR_CRITIC_ROLLOUT: dict[str, BaseDistribution] = {
    "n_steps_pow": IntDistribution(5, 12),
    "batch_size_pow": IntDistribution(5, 10),
    "one_minus_gamma": _log_uniform(0.0001, 0.03),
    "one_minus_gae_lambda": _log_uniform(0.0001, 0.1),
    "learning_rate": _log_uniform(1e-5, 2e-3),
}


# --------------------------------------------------------------------------------------------------------- GRPO
def convert_grpo_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Raw GRPO trial parameters -> ``GRPO`` keyword arguments.

    ``clip_higher`` (the DAPO-style extra room above the clip range) becomes
    ``clip_range_high = clip_range + clip_higher`` (``None``, i.e. symmetric, when it is 0).
    """
    hyperparams = _convert_common(sampled_params, actor_critic=False)
    clip_higher = hyperparams.pop("clip_higher", None)
    if clip_higher is not None:
        base = hyperparams.get("clip_range", 0.2)
        hyperparams["clip_range_high"] = round(base + clip_higher, 6) if clip_higher > 0 else None
    return hyperparams


#: GRPO's search space.
GRPO_SPACE: dict[str, BaseDistribution] = {
    **GROUP_ROLLOUT,
    "batch_size_pow": IntDistribution(5, 10),  # 2**5 = 32 to 2**10 = 1024 steps per minibatch
    "n_epochs": CategoricalDistribution([1, 5, 10, 20]),
    "one_minus_gamma": _log_uniform(0.0001, 0.05),
    "learning_rate": _log_uniform(1e-5, 3e-3),
    "clip_range": CategoricalDistribution([0.1, 0.2, 0.3]),
    "clip_higher": CategoricalDistribution([0.0, 0.08, 0.16]),
    "beta": CategoricalDistribution([0.0, 0.001, 0.01, 0.04, 0.1]),
    "loss_type": CategoricalDistribution(["grpo", "bnpo", "dr_grpo"]),
    "advantage_estimator": CategoricalDistribution(list(GRPO_ESTIMATORS)),
    "ent_coef": _log_uniform(1e-8, 0.01),
    "max_grad_norm": FloatDistribution(0.3, 2.0),
    **NETWORK,
}


def sample_grpo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """GRPO's search space: group size, rollout and minibatch sizes, epochs, learning rate, (asymmetric) clipping,
    KL coefficient to the reference policy, loss normalisation, group advantage estimator, discount, network."""
    return _sample(trial, GRPO_SPACE, convert_grpo_params)


# --------------------------------------------------------------------------------------------------- ExactTRPO
def convert_exact_trpo_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Raw ExactTRPO trial parameters -> ``ExactTRPO`` keyword arguments (sb3-contrib TRPO's names)."""
    return _convert_common(sampled_params, actor_critic=True)


#: ExactTRPO's search space (no ``cg_max_steps``: the exact solve does not iterate; it matters only when
#: ``fisher_solver`` falls back to CG).
EXACT_TRPO_SPACE: dict[str, BaseDistribution] = {
    **ACTOR_CRITIC_ROLLOUT,
    "n_critic_updates": IntDistribution(5, 30),
    "target_kl": _log_uniform(0.001, 0.1),
    "cg_damping": _log_uniform(1e-4, 0.5),
    "sub_sampling_factor": CategoricalDistribution([1, 2, 4]),
    "line_search_shrinking_factor": CategoricalDistribution([0.6, 0.7, 0.8, 0.9]),
    **NETWORK,
    "net_arch": CategoricalDistribution(["small", "medium"]),
}


def sample_exact_trpo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """ExactTRPO's search space: trust-region size ``target_kl`` (delta), Fisher damping, Fisher state subsampling,
    line search shrinking, critic updates / minibatch / learning rate, GAE, discount, rollout size, network."""
    return _sample(trial, EXACT_TRPO_SPACE, convert_exact_trpo_params)


# ----------------------------------------------------------------------------------------------- AdaptiveKLPPO
def convert_adaptive_kl_ppo_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Raw AdaptiveKLPPO trial parameters -> ``AdaptiveKLPPO`` keyword arguments.

    ``clip_range`` is ``None`` (the PPO paper's unclipped KL-penalty variant) or a float (clipping plus penalty).
    """
    return _convert_common(sampled_params, actor_critic=True)


#: AdaptiveKLPPO's search space.
ADAPTIVE_KL_PPO_SPACE: dict[str, BaseDistribution] = {
    **ACTOR_CRITIC_ROLLOUT,
    "ent_coef": _log_uniform(1e-8, 0.1),
    "n_epochs": CategoricalDistribution([1, 5, 10, 20]),
    "max_grad_norm": FloatDistribution(0.3, 2.0),
    "target_kl": _log_uniform(0.002, 0.05),
    "kl_coef": _log_uniform(0.01, 10.0),
    "kl_estimator": CategoricalDistribution(["exact", "k1", "k3"]),
    "kl_adaptation": CategoricalDistribution(["schulman", "proportional", "rllib"]),
    "clip_range": CategoricalDistribution([None, 0.1, 0.2, 0.3]),
    **NETWORK,
}


def sample_adaptive_kl_ppo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """AdaptiveKLPPO's search space: PPO's (rollout and minibatch sizes, epochs, learning rate, GAE, discount,
    entropy, gradient clipping, network) plus the KL target, initial beta, KL estimator of the loss, beta update
    rule, and whether to clip as well."""
    return _sample(trial, ADAPTIVE_KL_PPO_SPACE, convert_adaptive_kl_ppo_params)


# --------------------------------------------------------------------------------------------------- REINFORCE
def convert_reinforce_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Raw REINFORCE trial parameters -> ``REINFORCE`` keyword arguments (``baseline_decay`` is sampled always and
    used by ``baseline="moving_average"`` only)."""
    return _convert_common(sampled_params, actor_critic=False)


#: REINFORCE's search space (each batch one minibatch: ``batch_size=None``).
REINFORCE_SPACE: dict[str, BaseDistribution] = {
    "n_steps_pow": IntDistribution(5, 11),  # 2**5 = 32 to 2**11 = 2048 steps per env slot per rollout
    "n_epochs": CategoricalDistribution([1, 2, 4]),
    "one_minus_gamma": _log_uniform(0.0001, 0.05),
    "learning_rate": _log_uniform(1e-4, 1e-2),
    "baseline": CategoricalDistribution(list(REINFORCE_BASELINES)),
    "baseline_decay": CategoricalDistribution([0.5, 0.9, 0.99]),
    "normalize_advantage": CategoricalDistribution([False, True]),
    "ent_coef": _log_uniform(1e-8, 0.01),
    **NETWORK,
}


def sample_reinforce_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """REINFORCE's search space: rollout size, passes over each batch, learning rate, baseline and its decay,
    advantage normalisation, entropy bonus, discount, network. Each batch is one minibatch (``batch_size=None``):
    the textbook one gradient step per rollout and epoch."""
    return _sample(trial, REINFORCE_SPACE, convert_reinforce_params)


# --------------------------------------------------------------------------------------------------- OnlineDPO
def convert_online_dpo_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Raw OnlineDPO trial parameters -> ``OnlineDPO`` keyword arguments (``batch_size``: preference pairs)."""
    hyperparams = _convert_common(sampled_params, actor_critic=False)
    interval = hyperparams.pop("ref_update_interval", None)
    if interval is not None:
        hyperparams["ref_update_interval"] = None if interval == 0 else interval
    return hyperparams


#: OnlineDPO's search space (``ref_update_interval`` 0: the reference never follows the policy).
ONLINE_DPO_SPACE: dict[str, BaseDistribution] = {
    **GROUP_ROLLOUT,
    "batch_size_pow": IntDistribution(3, 8),  # 2**3 = 8 to 2**8 = 256 preference pairs per minibatch
    "n_epochs": CategoricalDistribution([1, 2, 4, 10]),
    "one_minus_gamma": _log_uniform(0.0001, 0.05),
    "learning_rate": _log_uniform(1e-5, 3e-3),
    "beta": _log_uniform(0.01, 1.0),
    "loss_type": CategoricalDistribution(["sigmoid", "ipo"]),
    "pairs": CategoricalDistribution(["best_worst", "all"]),
    "ref_update_interval": CategoricalDistribution([0, 1, 5]),
    "ent_coef": _log_uniform(1e-8, 0.01),
    "max_grad_norm": FloatDistribution(0.3, 2.0),
    **NETWORK,
}


def sample_online_dpo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """OnlineDPO's search space: group size, rollout size, pairs per minibatch, epochs, learning rate, beta, loss
    type, pairing, how often the reference follows the policy (0: never), entropy, discount, network."""
    return _sample(trial, ONLINE_DPO_SPACE, convert_online_dpo_params)


#: rl-zoo key -> sampler, merged into ``rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER`` by :func:`sb3_grpo.zoo.register`.
HYPERPARAMS_SAMPLER = {
    "grpo": sample_grpo_params,
    "exact_trpo": sample_exact_trpo_params,
    "adaptive_kl_ppo": sample_adaptive_kl_ppo_params,
    "reinforce": sample_reinforce_params,
    "online_dpo": sample_online_dpo_params,
}

#: rl-zoo key -> converter (raw trial parameters -> constructor arguments), for ``--trial-id``.
HYPERPARAMS_CONVERTER = {
    "grpo": convert_grpo_params,
    "exact_trpo": convert_exact_trpo_params,
    "adaptive_kl_ppo": convert_adaptive_kl_ppo_params,
    "reinforce": convert_reinforce_params,
    "online_dpo": convert_online_dpo_params,
}
