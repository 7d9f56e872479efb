"""
Solvers of ExactTRPO's damped Fisher systems: conjugate gradients (matrix-free, from a zero start, so
deterministic), preconditioned refinement to a stated residual, and the Cholesky helpers of the exact solves.
"""

from __future__ import annotations

from collections.abc import Callable

import torch as th

__all__ = ["cholesky", "cholesky_apply", "conjugate_gradient", "preconditioned_refinement"]


def conjugate_gradient(
    matvec: Callable[[th.Tensor], th.Tensor], b: th.Tensor, max_iter: int, residual_tol: float = 1e-10
) -> th.Tensor:
    """Solve ``H x = b`` for a symmetric positive definite ``H`` given as ``matvec``, from ``x = 0`` (deterministic).

    :param residual_tol: stop once the squared residual norm falls below it.
    """
    x = th.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = th.dot(r, r)
    for _ in range(max_iter):
        if float(rr) < residual_tol:
            break
        hp = matvec(p)
        alpha = rr / th.dot(p, hp)
        x += alpha * p
        r -= alpha * hp
        rr_new = th.dot(r, r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def preconditioned_refinement(
    matvec: Callable[[th.Tensor], th.Tensor],
    precondition: Callable[[th.Tensor], th.Tensor],
    b: th.Tensor,
    max_iter: int,
    tol: float,
) -> tuple[th.Tensor, int, float]:
    """Solve ``H x = b`` (``H`` symmetric positive definite, as ``matvec``) by preconditioned conjugate gradients.

    Starts from ``x0 = precondition(b)`` (the preconditioner's own solution) and stops once the relative residual
    ``||b - H x|| / ||b||`` is at most ``tol`` or after ``max_iter`` iterations (each: one ``matvec`` and one
    ``precondition``). Deterministic.

    :return: ``x``, the number of iterations and the final relative residual (recomputed from ``H x``, not the
        recursion's estimate).
    """
    b_norm = float(b.norm())
    x = precondition(b)
    if b_norm == 0:
        return x, 0, 0.0
    r = b - matvec(x)
    iters = 0
    if float(r.norm()) > tol * b_norm and max_iter > 0:
        z = precondition(r)
        p = z.clone()
        rz = th.dot(r, z)
        while iters < max_iter:
            iters += 1
            hp = matvec(p)
            alpha = rz / th.dot(p, hp)
            x += alpha * p
            r -= alpha * hp
            if float(r.norm()) <= tol * b_norm:
                break
            z = precondition(r)
            rz_new = th.dot(r, z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        r = b - matvec(x)
    return x, iters, float(r.norm()) / b_norm


def cholesky(mat: th.Tensor) -> th.Tensor:
    """Lower Cholesky factor; retried in float64 when ``mat`` is not numerically positive definite in its dtype."""
    chol, info = th.linalg.cholesky_ex(mat)
    if int(info) != 0:
        chol, info = th.linalg.cholesky_ex(mat.double())
        if int(info) != 0:
            raise RuntimeError("The damped Fisher is not numerically positive definite; increase the damping.")
    return chol


def cholesky_apply(chol: th.Tensor, rhs: th.Tensor) -> th.Tensor:
    return th.cholesky_solve(rhs.to(chol.dtype).unsqueeze(1), chol).squeeze(1).to(rhs.dtype)
