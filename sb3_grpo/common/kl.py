"""
KL divergences between action distributions: exact (analytic) and sampled estimators.

Sampled estimators of ``KL(p || q)`` from actions ``x ~ p`` take ``log_ratio = log q(x) - log p(x)``
(see J. Schulman, "Approximating KL Divergence", http://joschu.net/blog/kl-approx.html):

- ``k1 = -log_ratio``: unbiased, high variance, can be negative;
- ``k2 = log_ratio**2 / 2``: biased, low variance;
- ``k3 = exp(log_ratio) - 1 - log_ratio``: unbiased and always >= 0 (GRPO's estimator).

GRPO's penalty ``KL(pi_theta || pi_ref)`` uses ``log_ratio = log pi_ref(a) - log pi_theta(a)``:
``k3 = pi_ref/pi_theta - log(pi_ref/pi_theta) - 1``.

The exact KL is computed from distribution parameters, so a batch's "old" distribution can be stored once
(:func:`distribution_parameters`) and compared with the current policy on any minibatch (:func:`exact_kl`).
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
from torch.distributions import Bernoulli, Categorical, Normal
from torch.distributions import kl_divergence as torch_kl

__all__ = ["KL_ESTIMATORS", "distribution_parameters", "exact_kl", "kl_estimate", "supports_exact_kl", "torch_distributions"]

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl_estimate(log_ratio: th.Tensor, estimator: str = "k3") -> th.Tensor:
    """Per-sample estimate of ``KL(p || q)`` from ``log_ratio = log q(x) - log p(x)`` with ``x ~ p``.

    :param log_ratio: any shape.
    :param estimator: ``"k1"``, ``"k2"`` or ``"k3"``.
    :return: a tensor of the same shape.
    """
    if estimator == "k1":
        return -log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio**2
    if estimator == "k3":
        return th.expm1(log_ratio) - log_ratio
    raise ValueError(f"Unknown KL estimator {estimator!r}; choose one of {KL_ESTIMATORS}.")


def _check_supported(distribution: Distribution) -> None:
    if isinstance(distribution, StateDependentNoiseDistribution) and distribution.bijector is not None:
        raise NotImplementedError("The exact KL of a squashed (tanh) gSDE distribution has no closed form.")
    if not isinstance(
        distribution,
        (CategoricalDistribution, MultiCategoricalDistribution, BernoulliDistribution, DiagGaussianDistribution),
    ):
        raise NotImplementedError(f"No exact KL for {type(distribution).__name__}.")


def supports_exact_kl(distribution: Distribution) -> bool:
    """Whether :func:`exact_kl` has a closed form for this distribution (Categorical, MultiCategorical, Bernoulli,
    diagonal Gaussian; not gSDE, whose noise depends on the state through sampled exploration matrices)."""
    try:
        _check_supported(distribution)
    except NotImplementedError:
        return False
    return True


def distribution_parameters(distribution: Distribution) -> th.Tensor:
    """The parameters of a batch of SB3 action distributions, as one ``(N, d)`` tensor.

    Categorical, MultiCategorical and Bernoulli: the logits. Diagonal Gaussian: mean and std. gSDE is not supported
    (see :func:`supports_exact_kl`).
    """
    _check_supported(distribution)
    dist = distribution.distribution
    if isinstance(distribution, MultiCategoricalDistribution):
        return th.cat([d.logits for d in dist], dim=1)  # type: ignore[union-attr]
    if isinstance(distribution, (CategoricalDistribution, BernoulliDistribution)):
        return dist.logits  # type: ignore[union-attr]
    return th.cat([dist.mean, dist.stddev], dim=1)  # type: ignore[union-attr]


def torch_distributions(template: Distribution, params: th.Tensor) -> list[th.distributions.Distribution]:
    """Rebuild torch distributions (one per independent action component group) from :func:`distribution_parameters`."""
    _check_supported(template)
    if isinstance(template, MultiCategoricalDistribution):
        return [Categorical(logits=chunk) for chunk in th.split(params, list(template.action_dims), dim=1)]
    if isinstance(template, CategoricalDistribution):
        return [Categorical(logits=params)]
    if isinstance(template, BernoulliDistribution):
        return [Bernoulli(logits=params)]
    mean, std = th.chunk(params, 2, dim=1)
    return [Normal(mean, std)]


def exact_kl(old_params: th.Tensor, new_distribution: Distribution) -> th.Tensor:
    """Analytic ``KL(old || new)`` per state, summed over independent action dimensions.

    :param old_params: ``(N, d)`` from :func:`distribution_parameters` of the old distribution.
    :param new_distribution: the current SB3 distribution on the same N states (differentiable).
    :return: ``(N,)`` tensor.
    """
    _check_supported(new_distribution)
    olds = torch_distributions(new_distribution, old_params)
    current = new_distribution.distribution
    news = list(current) if isinstance(current, (list, tuple)) else [current]
    total = 0.0
    for old, new in zip(olds, news, strict=True):
        kl = torch_kl(old, new)
        total = total + (kl.sum(dim=1) if kl.dim() > 1 else kl)
    return total  # type: ignore[return-value]
