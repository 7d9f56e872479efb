"""
Optuna search spaces (samplers) and their converters for rl-zoo's ``-optimize`` / ``--trial-id``.

rl_zoo3 calls a sampler as ``sampler(trial, n_actions, n_envs, additional_args)`` and uses the returned dict as
constructor arguments. With ``--trial-id`` (or when a study is reloaded) it calls the converter on the trial's
*raw* Optuna parameters (``study.trials[i].params``) to get the same constructor arguments back. So every sampler
here only records raw parameters with ``trial.suggest_*`` and returns ``CONVERTER(raw)``: what a trial trained
with and what ``--trial-id`` retrains with are one function of the stored parameters.

Raw parameter conventions follow rl_zoo3's: ``one_minus_gamma`` / ``one_minus_gae_lambda`` (searched on a log
scale), ``n_steps_pow`` / ``batch_size_pow`` (powers of two), ``net_arch`` and ``activation_fn`` as names.
"""

from __future__ import annotations

from typing import Any

import optuna
from torch import nn

__all__ = [
    "HYPERPARAMS_CONVERTER",
    "HYPERPARAMS_SAMPLER",
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
]

#: Hidden layers per network-size name. Actor-critic algorithms get ``dict(pi=..., vf=...)``, GRPO (actor only)
#: a plain list.
NET_ARCHS: dict[str, list[int]] = {"tiny": [64], "small": [64, 64], "medium": [256, 256]}

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU}

#: GRPO's advantage estimators that the search tries (all three compare a trajectory with its group).
GRPO_ESTIMATORS = ("group_zscore", "leave_one_out", "group_step_baseline")


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


def sample_grpo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """GRPO's search space: group size, rollout and minibatch sizes, epochs, learning rate, (asymmetric) clipping,
    KL coefficient to the reference policy, loss normalisation, group advantage estimator, discount, network."""
    raw = {
        "group_size": trial.suggest_categorical("group_size", [2, 4, 8, 16]),
        # 2**5 = 32 to 2**11 = 2048 steps per env slot per rollout
        "n_steps_pow": trial.suggest_int("n_steps_pow", 5, 11),
        # 2**5 = 32 to 2**10 = 1024 steps per minibatch
        "batch_size_pow": trial.suggest_int("batch_size_pow", 5, 10),
        "n_epochs": trial.suggest_categorical("n_epochs", [1, 5, 10, 20]),
        "one_minus_gamma": trial.suggest_float("one_minus_gamma", 0.0001, 0.05, log=True),
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 3e-3, log=True),
        "clip_range": trial.suggest_categorical("clip_range", [0.1, 0.2, 0.3]),
        "clip_higher": trial.suggest_categorical("clip_higher", [0.0, 0.08, 0.16]),
        "beta": trial.suggest_categorical("beta", [0.0, 0.001, 0.01, 0.04, 0.1]),
        "loss_type": trial.suggest_categorical("loss_type", ["grpo", "bnpo", "dr_grpo"]),
        "advantage_estimator": trial.suggest_categorical("advantage_estimator", list(GRPO_ESTIMATORS)),
        "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.01, log=True),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 0.3, 2.0),
        "net_arch": trial.suggest_categorical("net_arch", ["tiny", "small", "medium"]),
        "activation_fn": trial.suggest_categorical("activation_fn", ["tanh", "relu"]),
    }
    hyperparams = convert_grpo_params(raw)
    _display(trial, hyperparams)
    return hyperparams


# --------------------------------------------------------------------------------------------------- ExactTRPO
def convert_exact_trpo_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Raw ExactTRPO trial parameters -> ``ExactTRPO`` keyword arguments (sb3-contrib TRPO's names)."""
    return _convert_common(sampled_params, actor_critic=True)


def sample_exact_trpo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """ExactTRPO's search space: trust-region size ``target_kl`` (delta), Fisher damping, Fisher state subsampling,
    line search shrinking, critic updates / minibatch / learning rate, GAE, discount, rollout size, network.

    No ``cg_max_steps``: the exact solve does not iterate (it matters only when ``fisher_solver`` falls back to CG).
    """
    raw = {
        # 2**5 = 32 to 2**12 = 4096 steps per env per rollout
        "n_steps_pow": trial.suggest_int("n_steps_pow", 5, 12),
        # critic minibatch: 2**5 = 32 to 2**10 = 1024
        "batch_size_pow": trial.suggest_int("batch_size_pow", 5, 10),
        "one_minus_gamma": trial.suggest_float("one_minus_gamma", 0.0001, 0.03, log=True),
        "one_minus_gae_lambda": trial.suggest_float("one_minus_gae_lambda", 0.0001, 0.1, log=True),
        # the critic's learning rate (the actor step is the natural-gradient step)
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 2e-3, log=True),
        "n_critic_updates": trial.suggest_int("n_critic_updates", 5, 30),
        "target_kl": trial.suggest_float("target_kl", 0.001, 0.1, log=True),
        "cg_damping": trial.suggest_float("cg_damping", 1e-4, 0.5, log=True),
        "sub_sampling_factor": trial.suggest_categorical("sub_sampling_factor", [1, 2, 4]),
        "line_search_shrinking_factor": trial.suggest_categorical("line_search_shrinking_factor", [0.6, 0.7, 0.8, 0.9]),
        "net_arch": trial.suggest_categorical("net_arch", ["small", "medium"]),
        "activation_fn": trial.suggest_categorical("activation_fn", ["tanh", "relu"]),
    }
    hyperparams = convert_exact_trpo_params(raw)
    _display(trial, hyperparams)
    return hyperparams


# ----------------------------------------------------------------------------------------------- AdaptiveKLPPO
def convert_adaptive_kl_ppo_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Raw AdaptiveKLPPO trial parameters -> ``AdaptiveKLPPO`` keyword arguments.

    ``clip_range`` is ``None`` (the PPO paper's unclipped KL-penalty variant) or a float (clipping plus penalty).
    """
    return _convert_common(sampled_params, actor_critic=True)


def sample_adaptive_kl_ppo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """AdaptiveKLPPO's search space: PPO's (rollout and minibatch sizes, epochs, learning rate, GAE, discount,
    entropy, gradient clipping, network) plus the KL target, initial beta, KL estimator of the loss, beta update
    rule, and whether to clip as well."""
    raw = {
        "n_steps_pow": trial.suggest_int("n_steps_pow", 5, 12),
        "batch_size_pow": trial.suggest_int("batch_size_pow", 5, 10),
        "one_minus_gamma": trial.suggest_float("one_minus_gamma", 0.0001, 0.03, log=True),
        "one_minus_gae_lambda": trial.suggest_float("one_minus_gae_lambda", 0.0001, 0.1, log=True),
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 2e-3, log=True),
        "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.1, log=True),
        "n_epochs": trial.suggest_categorical("n_epochs", [1, 5, 10, 20]),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 0.3, 2.0),
        "target_kl": trial.suggest_float("target_kl", 0.002, 0.05, log=True),
        "kl_coef": trial.suggest_float("kl_coef", 0.01, 10.0, log=True),
        "kl_estimator": trial.suggest_categorical("kl_estimator", ["exact", "k1", "k3"]),
        "kl_adaptation": trial.suggest_categorical("kl_adaptation", ["schulman", "proportional", "rllib"]),
        "clip_range": trial.suggest_categorical("clip_range", [None, 0.1, 0.2, 0.3]),
        "net_arch": trial.suggest_categorical("net_arch", ["tiny", "small", "medium"]),
        "activation_fn": trial.suggest_categorical("activation_fn", ["tanh", "relu"]),
    }
    hyperparams = convert_adaptive_kl_ppo_params(raw)
    _display(trial, hyperparams)
    return hyperparams


# --------------------------------------------------------------------------------------------------- REINFORCE
#: REINFORCE's baselines that the search tries (the built-ins and the registered estimator that fits).
REINFORCE_BASELINES = ("moving_average", "batch_mean", "none", "reinforce_baseline")


def convert_reinforce_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Raw REINFORCE trial parameters -> ``REINFORCE`` keyword arguments (``baseline_decay`` is sampled always and
    used by ``baseline="moving_average"`` only)."""
    return _convert_common(sampled_params, actor_critic=False)


def sample_reinforce_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """REINFORCE's search space: rollout size, passes over each batch, learning rate, baseline and its decay,
    advantage normalisation, entropy bonus, discount, network. Each batch is one minibatch (``batch_size=None``):
    the textbook one gradient step per rollout and epoch."""
    raw = {
        # 2**5 = 32 to 2**11 = 2048 steps per env slot per rollout
        "n_steps_pow": trial.suggest_int("n_steps_pow", 5, 11),
        "n_epochs": trial.suggest_categorical("n_epochs", [1, 2, 4]),
        "one_minus_gamma": trial.suggest_float("one_minus_gamma", 0.0001, 0.05, log=True),
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True),
        "baseline": trial.suggest_categorical("baseline", list(REINFORCE_BASELINES)),
        "baseline_decay": trial.suggest_categorical("baseline_decay", [0.5, 0.9, 0.99]),
        "normalize_advantage": trial.suggest_categorical("normalize_advantage", [False, True]),
        "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.01, log=True),
        "net_arch": trial.suggest_categorical("net_arch", ["tiny", "small", "medium"]),
        "activation_fn": trial.suggest_categorical("activation_fn", ["tanh", "relu"]),
    }
    hyperparams = convert_reinforce_params(raw)
    _display(trial, hyperparams)
    return hyperparams


# --------------------------------------------------------------------------------------------------- OnlineDPO
def convert_online_dpo_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """Raw OnlineDPO trial parameters -> ``OnlineDPO`` keyword arguments (``batch_size``: preference pairs)."""
    hyperparams = _convert_common(sampled_params, actor_critic=False)
    interval = hyperparams.pop("ref_update_interval", None)
    if interval is not None:
        hyperparams["ref_update_interval"] = None if interval == 0 else interval
    return hyperparams


def sample_online_dpo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
    """OnlineDPO's search space: group size, rollout size, pairs per minibatch, epochs, learning rate, beta, loss
    type, pairing, how often the reference follows the policy (0: never), entropy, discount, network."""
    raw = {
        "group_size": trial.suggest_categorical("group_size", [2, 4, 8, 16]),
        # 2**5 = 32 to 2**11 = 2048 steps per env slot per rollout
        "n_steps_pow": trial.suggest_int("n_steps_pow", 5, 11),
        # 2**3 = 8 to 2**8 = 256 preference pairs per minibatch
        "batch_size_pow": trial.suggest_int("batch_size_pow", 3, 8),
        "n_epochs": trial.suggest_categorical("n_epochs", [1, 2, 4, 10]),
        "one_minus_gamma": trial.suggest_float("one_minus_gamma", 0.0001, 0.05, log=True),
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 3e-3, log=True),
        "beta": trial.suggest_float("beta", 0.01, 1.0, log=True),
        "loss_type": trial.suggest_categorical("loss_type", ["sigmoid", "ipo"]),
        "pairs": trial.suggest_categorical("pairs", ["best_worst", "all"]),
        "ref_update_interval": trial.suggest_categorical("ref_update_interval", [0, 1, 5]),
        "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.01, log=True),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 0.3, 2.0),
        "net_arch": trial.suggest_categorical("net_arch", ["tiny", "small", "medium"]),
        "activation_fn": trial.suggest_categorical("activation_fn", ["tanh", "relu"]),
    }
    hyperparams = convert_online_dpo_params(raw)
    _display(trial, hyperparams)
    return hyperparams


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
