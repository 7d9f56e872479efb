"""
KL divergences between action distributions: exact (analytic) and sampled estimators.

Sampled estimators of ``KL(p || q)`` from actions ``x ~ p`` take ``log_ratio = log q(x) - log p(x)``
(see J. Schulman, "Approximating KL Divergence", http://joschu.net/blog/kl-approx.html):

- ``k1 = -log_ratio``: unbiased, high variance, can be negative;
- ``k2 = log_ratio**2 / 2``: biased, low variance;
- ``k3 = exp(log_ratio) - 1 - log_ratio``: unbiased and always >= 0 (GRPO's estimator);
- ``k3+``: the value of ``k3`` with the gradient of ``k2`` (a straight-through estimator, verl's ``kl_penalty="k3+"``
  in ``verl/trainer/ppo/core_algos.py``): as a loss term its value estimates the KL without bias, and its gradient,
  ``log_ratio`` times the gradient of ``log_ratio``, is ``(log p - log q)`` times the gradient of ``log p``, whose
  expectation under ``p`` is the gradient of ``KL(p || q)`` in ``p``'s parameters (that of ``k1`` is zero in
  expectation, that of ``k3`` is the gradient of the reverse ``KL(q || p)``).

GRPO's penalty ``KL(pi_theta || pi_ref)`` uses ``log_ratio = log pi_ref(a) - log pi_theta(a)``:
``k3 = pi_ref/pi_theta - log(pi_ref/pi_theta) - 1``.

The exact KL is computed from distribution parameters, so a batch's "old" distribution can be stored once
(:func:`distribution_parameters`) and compared with the current policy on any minibatch (:func:`exact_kl`).

gSDE (SB3's ``StateDependentNoiseDistribution``) is, at each state, the diagonal Gaussian ``N(mu(s), sigma(s)^2)``
with ``sigma_i(s)^2 = sum_j latent_j(s)^2 std_ji^2 + epsilon`` (``std = exp(log_std)``): its KL is the Gaussian one
on those per-state parameters. With ``squash_output=True`` the actions are ``tanh`` of that Gaussian; a KL divergence
is unchanged by an invertible map applied to both distributions, so the squashed KL is the Gaussian one as well.
"""

from __future__ import annotations

import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)
from torch.nn import functional as F

__all__ = ["KL_ESTIMATORS", "distribution_parameters", "exact_kl", "kl_estimate", "supports_exact_kl"]

KL_ESTIMATORS = ("k1", "k2", "k3", "k3+")


def kl_estimate(log_ratio: th.Tensor, estimator: str = "k3") -> th.Tensor:
    """Per-sample estimate of ``KL(p || q)`` from ``log_ratio = log q(x) - log p(x)`` with ``x ~ p``.

    :param log_ratio: any shape.
    :param estimator: ``"k1"``, ``"k2"``, ``"k3"`` or ``"k3+"`` (the value of ``k3``, the gradient of ``k2``).
    :return: a tensor of the same shape.
    """
    if estimator == "k1":
        return -log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio**2
    if estimator == "k3":
        return th.expm1(log_ratio) - log_ratio
    if estimator == "k3+":
        k2 = 0.5 * log_ratio**2
        return k2 - k2.detach() + (th.expm1(log_ratio) - log_ratio).detach()
    raise ValueError(f"Unknown KL estimator {estimator!r}; choose one of {KL_ESTIMATORS}.")


_SUPPORTED = (
    CategoricalDistribution,
    MultiCategoricalDistribution,
    BernoulliDistribution,
    DiagGaussianDistribution,
    StateDependentNoiseDistribution,
)


def _check_supported(distribution: Distribution) -> None:
    if not isinstance(distribution, _SUPPORTED):
        raise NotImplementedError(
            f"No exact KL for {type(distribution).__name__} (supported: {', '.join(cls.__name__ for cls in _SUPPORTED)})."
        )


def supports_exact_kl(distribution: Distribution) -> bool:
    """Whether :func:`exact_kl` has a closed form for this distribution: Categorical, MultiCategorical, Bernoulli,
    diagonal Gaussian and gSDE (a diagonal Gaussian at each state, squashed or not), SB3's on-policy distributions."""
    return isinstance(distribution, _SUPPORTED)


def distribution_parameters(distribution: Distribution) -> th.Tensor:
    """The parameters of a batch of SB3 action distributions, as one ``(N, d)`` tensor.

    Categorical, MultiCategorical and Bernoulli: the logits. Diagonal Gaussian and gSDE: the (pre-squashing) mean and
    the per-state standard deviation, ``(N, 2 * action_dim)``.
    """
    _check_supported(distribution)
    dist = distribution.distribution
    if isinstance(distribution, MultiCategoricalDistribution):
        return th.cat([d.logits for d in dist], dim=1)  # type: ignore[union-attr]
    if isinstance(distribution, (CategoricalDistribution, BernoulliDistribution)):
        return dist.logits  # type: ignore[union-attr]
    return th.cat([dist.mean, dist.stddev], dim=1)  # type: ignore[union-attr]


def _categorical_kl(old_logits: th.Tensor, new_log_p: th.Tensor) -> th.Tensor:
    """``sum_k p_k (log p_k - log q_k)`` over the last dimension, from (possibly unnormalised) old logits and the new
    distribution's log-probabilities (``torch.distributions.Categorical.logits``, which torch normalises)."""
    old_log_p = th.log_softmax(old_logits, dim=-1)
    return (old_log_p.exp() * (old_log_p - new_log_p)).sum(dim=-1)


def _bernoulli_kl(old_logits: th.Tensor, new_logits: th.Tensor) -> th.Tensor:
    """Per-component ``KL(Bernoulli(sigmoid(a)) || Bernoulli(sigmoid(b)))``, through log-sigmoids (no log(0))."""
    p = th.sigmoid(old_logits)
    log_p, log_1mp = F.logsigmoid(old_logits), F.logsigmoid(-old_logits)
    log_q, log_1mq = F.logsigmoid(new_logits), F.logsigmoid(-new_logits)
    return p * (log_p - log_q) + (1 - p) * (log_1mp - log_1mq)


def _gaussian_kl(old_mean: th.Tensor, old_std: th.Tensor, new_mean: th.Tensor, new_std: th.Tensor) -> th.Tensor:
    """Per-component ``KL(N(m0, s0^2) || N(m1, s1^2)) = log(s1/s0) + (s0^2 + (m0 - m1)^2) / (2 s1^2) - 1/2``."""
    var_ratio = (old_std / new_std) ** 2
    return 0.5 * (var_ratio + ((old_mean - new_mean) / new_std) ** 2 - 1 - th.log(var_ratio))


def exact_kl(old_params: th.Tensor, new_distribution: Distribution) -> th.Tensor:
    """Analytic ``KL(old || new)`` per state, summed over independent action dimensions.

    The closed forms are written on tensors directly (no ``torch.distributions`` objects, no argument validation):
    this runs on every minibatch of :class:`~sb3_grpo.AdaptiveKLPPO` and in ExactTRPO's line search.
    ``tests/test_kl.py`` checks it against ``torch.distributions.kl_divergence``.

    :param old_params: ``(N, d)`` from :func:`distribution_parameters` of the old distribution.
    :param new_distribution: the current SB3 distribution on the same N states (differentiable).
    :return: ``(N,)`` tensor.
    """
    _check_supported(new_distribution)
    current = new_distribution.distribution
    if isinstance(new_distribution, MultiCategoricalDistribution):
        chunks = th.split(old_params, list(new_distribution.action_dims), dim=1)
        # SB3 types .distribution as one torch Distribution; MultiCategorical's is a list of Categoricals
        kls = [_categorical_kl(old, new.logits) for old, new in zip(chunks, current, strict=True)]  # type: ignore[arg-type,attr-defined]
        return th.stack(kls, dim=1).sum(dim=1)
    if isinstance(new_distribution, CategoricalDistribution):
        return _categorical_kl(old_params, current.logits)  # type: ignore[union-attr]
    if isinstance(new_distribution, BernoulliDistribution):
        return _bernoulli_kl(old_params, current.logits).sum(dim=1)  # type: ignore[union-attr]
    old_mean, old_std = th.chunk(old_params, 2, dim=1)
    return _gaussian_kl(old_mean, old_std, current.mean, current.stddev).sum(dim=1)  # type: ignore[union-attr]
