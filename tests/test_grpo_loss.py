"""GRPO's loss: hand-computed loss weights and step losses, trajectory-level ratios, the clipped gradient, the KL
penalty as GRPO adds it (every policy loss by hand: tests/test_policy_losses.py)."""

import numpy as np
import pytest
import torch as th

import sb3_grpo
from sb3_grpo import PolicyLossInputs
from sb3_grpo.common.kl import kl_estimate
from sb3_grpo.grpo.loss import trajectory_loss_weights


def grpo_step_loss(new, old, adv, eps_low, eps_high, beta=0.0, ref_log_prob=None, trajectory=None, n_trajectories=0):
    """The per-step loss GRPO minimises with the default loss, ``clip`` (``gspo`` with ``trajectory``), and the k3 KL
    penalty it adds: ``(per_step, surrogate, ratio, kl)``."""
    inputs = PolicyLossInputs(
        log_prob=new,
        old_log_prob=old,
        advantages=adv,
        weights=th.ones_like(adv),
        trajectory=th.zeros_like(adv, dtype=th.long) if trajectory is None else trajectory,
        n_trajectories=max(n_trajectories, 1),
        clip_range_low=eps_low,
        clip_range_high=eps_high,
    )
    outputs = sb3_grpo.get_policy_loss("clip" if trajectory is None else "gspo").compute(inputs)
    per_step, kl = outputs.per_step, None
    if ref_log_prob is not None:
        kl = kl_estimate(ref_log_prob - new, "k3")
        per_step = per_step + beta * kl
    return per_step, -outputs.per_step, outputs.ratio, kl


def test_loss_weights_by_hand():
    lengths = np.array([2, 4, 1])
    # grpo: 1 / (M L_i) with M = 3 trajectories
    np.testing.assert_allclose(trajectory_loss_weights(lengths, "grpo", 2), [1 / 6, 1 / 12, 1 / 3])
    # bnpo: 1 / N with N = 7 steps; dapo is the same
    np.testing.assert_allclose(trajectory_loss_weights(lengths, "bnpo", 2), [1 / 7, 1 / 7, 1 / 7])
    np.testing.assert_allclose(trajectory_loss_weights(lengths, "dapo", 2), [1 / 7, 1 / 7, 1 / 7])
    # dr_grpo: 1 / (M C)
    np.testing.assert_allclose(trajectory_loss_weights(lengths, "dr_grpo", 2, loss_constant=10), [1 / 30] * 3)
    # sqrt scaling multiplies by sqrt(G)
    np.testing.assert_allclose(
        trajectory_loss_weights(lengths, "grpo", 4, "sqrt"), 2 * trajectory_loss_weights(lengths, "grpo", 4)
    )
    # every step weighs once: the weights of a full batch sum to 1 (grpo: per trajectory, bnpo: per step)
    lengths = np.array([2, 4, 1, 3])
    w = trajectory_loss_weights(lengths, "grpo", 2)
    assert np.isclose((w * lengths).sum(), 1.0)


def test_step_loss_by_hand():
    old = th.log(th.tensor([0.5, 0.5, 0.5, 0.5]))
    new = th.log(th.tensor([0.75, 0.25, 0.75, 0.55]))  # ratios 1.5, 0.5, 1.5, 1.1
    adv = th.tensor([1.0, -1.0, -1.0, 1.0])
    per_step, surrogate, _, kl = grpo_step_loss(new, old, adv, eps_low=0.2, eps_high=0.3)
    # min(rA, clip(r, 0.8, 1.3) A): 1.5*1 -> 1.3 ; 0.5*-1 -> min(-0.5, -0.8) = -0.8 ; 1.5*-1 -> -1.5 ; 1.1
    th.testing.assert_close(surrogate, th.tensor([1.3, -0.8, -1.5, 1.1]))
    th.testing.assert_close(per_step, -surrogate)
    assert kl is None
    # with a reference: + beta * (r - log r - 1), r = pi_ref / pi_theta
    ref = th.log(th.tensor([0.5, 0.5, 0.5, 0.5]))
    per_step, _, _, kl = grpo_step_loss(new, old, adv, 0.2, 0.2, beta=0.1, ref_log_prob=ref)
    r = th.tensor([0.5 / 0.75, 0.5 / 0.25, 0.5 / 0.75, 0.5 / 0.55])
    th.testing.assert_close(kl, r - th.log(r) - 1)
    surrogate_sym = th.tensor([1.2, -0.8, -1.5, 1.1])
    th.testing.assert_close(per_step, -surrogate_sym + 0.1 * (r - th.log(r) - 1))


def test_trajectory_level_ratio_is_geometric_mean():
    old = th.zeros(5)
    new = th.tensor([0.1, 0.3, -0.2, 0.0, 0.4])
    trajectory = th.tensor([0, 0, 1, 1, 1])
    _, _, ratio, _ = grpo_step_loss(new, old, th.ones(5), 10.0, 10.0, trajectory=trajectory, n_trajectories=2)
    expected = th.exp(th.tensor([0.2, 0.2, 0.2 / 3, 0.2 / 3, 0.2 / 3]))
    th.testing.assert_close(ratio, expected)


def test_trajectory_level_ratios_sum_without_atomics_off_the_cpu():
    """GSPO's per-trajectory sums go through ``trajectory_sums``: off the CPU ("meta" tensors run a non-CPU device's
    code path) a sorted ``index_put_(accumulate=True)``, never CUDA's atomic ``index_add``, so seeded runs reproduce."""
    from op_trace import RecordOps

    new, old, trajectory = th.zeros(5, device="meta"), th.zeros(5, device="meta"), th.zeros(5, dtype=th.long, device="meta")
    with RecordOps() as ops:
        grpo_step_loss(new, old, th.ones(5, device="meta"), 0.2, 0.2, trajectory=trajectory, n_trajectories=2)
    assert "index_put" in ops.ops and not ops.ops & {"index_add", "bincount", "scatter_add"}


def test_clipped_gradient_is_zero_outside_the_trust_region():
    new = th.log(th.tensor([0.9])).requires_grad_(True)  # ratio 1.8 against old 0.5, advantage > 0: clipped
    per_step, *_ = grpo_step_loss(new, th.log(th.tensor([0.5])), th.tensor([1.0]), 0.2, 0.2)
    per_step.sum().backward()
    assert new.grad.abs().item() == 0.0


def test_ratio_statistics_by_hand():
    from sb3_grpo.grpo.loss import ratio_statistics

    ratio = th.tensor([0.7, 0.9, 1.0, 1.3, 1.5, 0.75])
    advantages = th.tensor([-1.0, 2.0, 1.0, 1.0, -1.0, 1.0])
    fraction, low, high, ess = ratio_statistics(ratio, advantages, eps_low=0.2, eps_high=0.28)
    # outside [0.8, 1.28]: 0.7, 1.3, 1.5, 0.75; clipped below with A < 0: 0.7; above with A > 0: 1.3
    assert (fraction, low, high) == pytest.approx((4 / 6, 1 / 6, 1 / 6))
    assert ess == pytest.approx(6.15**2 / (6 * (0.49 + 0.81 + 1 + 1.69 + 2.25 + 0.5625)))
    assert ratio_statistics(th.ones(5), th.ones(5), 0.2, 0.2) == (0.0, 0.0, 0.0, pytest.approx(1.0))
