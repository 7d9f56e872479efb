"""
Exact Fisher information of an SB3 actor and exact natural-gradient solves.

For a state ``s`` the Fisher of the policy in the actor's parameters ``theta`` is ``J^T M J``, with ``J`` the
Jacobian of the action distribution's parameters ``z(s)`` (logits, or the Gaussian mean) w.r.t. ``theta`` and ``M``
the Fisher of the distribution in its own parameters, in closed form:

- Categorical: ``diag(p) - p p^T``, factored as ``M = A A^T`` with ``A = diag(sqrt p) - p sqrt(p)^T``
  (two classes: ``A = sqrt(p0 p1) [1, -1]^T``, one column);
- MultiCategorical: block-diagonal of the components' categorical ``M``;
- Bernoulli (MultiBinary): ``diag(p (1 - p))``;
- diagonal Gaussian with a state-independent ``log_std``: ``diag(1 / sigma^2)`` on the mean and ``2`` on each
  ``log_std`` (no cross term). The ``log_std`` block of the batch Fisher is therefore exactly ``2 I``, independent of
  the network, and is solved analytically.

The batch Fisher is the mean over the N given states: ``F = U U^T / N`` with ``U = [J_n^T A_n]_n`` of size
``P x Nk`` (``k`` columns of ``A`` per state). ``(F + lambda I) x = g`` is solved exactly with a Cholesky
factorisation in whichever space is smaller: parameters (``P x P``) or samples (``Nk x Nk``, Woodbury identity
``(lambda I + U U^T / N)^-1 = (I - U (N lambda I + U^T U)^-1 U^T) / lambda``).

When every parameter of the actor network belongs to an ``nn.Linear`` layer (MLP actors), ``U`` is never formed
per sample: for a layer with inputs ``a`` (a 1 appended for the bias) and backpropagated output sensitivities
``delta`` (one backward pass per column of ``A``), ``U_l^T U_l = (delta delta^T) o (a a^T)`` and products with
``U`` and ``U^T`` are two small matrix products. Other actors (CNN feature extractors, ...) get their per-sample
Jacobians from ``torch.func`` (``vmap(jacrev)``), which needs ``Nk x P`` memory.

:func:`conjugate_gradient` is the matrix-free alternative (zero start, so deterministic).
:func:`preconditioned_refinement` solves the system of a large batch's exact Fisher (matrix-free, structured
products) to a stated residual, with the exact factorisation of a subsample's Fisher as its start and
preconditioner (:meth:`ExactFisher.subset`, :meth:`ExactFisher.factorize`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
)
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from torch import nn

__all__ = [
    "FISHER_SOLVERS",
    "ExactFisher",
    "actor_parameters",
    "closed_form_fisher_problem",
    "conjugate_gradient",
    "directions_per_state",
    "distribution_fisher_factor",
    "distribution_inputs",
    "flat_to_params",
    "make_distribution",
    "preconditioned_refinement",
]

FISHER_SOLVERS = ("auto", "exact", "cg")
_CLOSED_FORM = (CategoricalDistribution, MultiCategoricalDistribution, BernoulliDistribution, DiagGaussianDistribution)


def closed_form_fisher_problem(policy: ActorCriticPolicy) -> str | None:
    """Why the policy's Fisher has no closed form here (``None`` when it has one)."""
    dist = policy.action_dist
    if not isinstance(dist, _CLOSED_FORM):
        what = "gSDE (use_sde=True)" if "StateDependent" in type(dist).__name__ else type(dist).__name__
        return (
            f"{what} has no closed-form Fisher here (supported: Categorical, MultiCategorical, Bernoulli and diagonal "
            "Gaussian with a state-independent log_std)"
        )
    if isinstance(dist, DiagGaussianDistribution) and not isinstance(getattr(policy, "log_std", None), nn.Parameter):
        return "the Gaussian policy has no state-independent log_std parameter"
    return None


def _cast_obs(obs: Any, dtype: th.dtype) -> Any:
    if isinstance(obs, dict):
        return {key: value.to(dtype) for key, value in obs.items()}
    return obs.to(dtype)


def distribution_inputs(policy: ActorCriticPolicy, obs: Any) -> th.Tensor:
    """The network part of the action distribution's parameters: logits, or the Gaussian mean, ``(N, d)``.

    Works in the dtype of the actor's parameters (float64 policies included: SB3's preprocessing casts to float32).
    """
    weight: th.Tensor = policy.action_net.weight  # type: ignore[assignment]  # SB3 types action_net as nn.Module
    dtype = weight.dtype
    features = policy.pi_features_extractor(
        _cast_obs(preprocess_obs(obs, policy.observation_space, normalize_images=policy.normalize_images), dtype)
    )
    return policy.action_net(policy.mlp_extractor.forward_actor(features))


def make_distribution(policy: ActorCriticPolicy, z: th.Tensor) -> Distribution:
    """The policy's SB3 distribution built from :func:`distribution_inputs` (closed-form distributions only)."""
    if isinstance(policy.action_dist, DiagGaussianDistribution):
        return policy.action_dist.proba_distribution(z, policy.log_std)
    return policy.action_dist.proba_distribution(action_logits=z)


def actor_parameters(policy: ActorCriticPolicy, obs: Any) -> list[tuple[str, nn.Parameter]]:
    """The trainable parameters the action distribution depends on, in ``named_parameters`` order.

    Found through the autograd graph of the distribution on ``obs`` (a few states suffice), so value-function
    parameters are excluded whatever their names.
    """
    named = [(name, p) for name, p in policy.named_parameters() if p.requires_grad]
    z = distribution_inputs(policy, obs)
    out = z.sum()
    log_std = getattr(policy, "log_std", None)
    if isinstance(log_std, nn.Parameter):
        out = out + log_std.sum()
    grads = th.autograd.grad(out, [p for _, p in named], allow_unused=True)
    return [(name, p) for (name, p), grad in zip(named, grads, strict=True) if grad is not None]


def directions_per_state(policy: ActorCriticPolicy) -> int:
    """``k``: the number of columns of the distribution's Fisher factor ``A`` (see :func:`distribution_fisher_factor`)."""
    dist = policy.action_dist
    if isinstance(dist, MultiCategoricalDistribution):
        return sum(1 if int(n) == 2 else int(n) for n in dist.action_dims)
    if isinstance(dist, CategoricalDistribution):
        return 1 if dist.action_dim == 2 else int(dist.action_dim)
    if isinstance(dist, BernoulliDistribution):
        return int(dist.action_dims)
    return int(dist.action_dim)  # type: ignore[attr-defined]  # every SB3 distribution sets it; the base class does not declare it


def distribution_fisher_factor(policy: ActorCriticPolicy, z: th.Tensor) -> th.Tensor:
    """``A`` with ``A_n A_n^T`` the Fisher of the action distribution in its network parameters ``z_n``.

    :param policy: the policy (its ``action_dist`` type and, for Gaussians, ``log_std``).
    :param z: ``(N, d)`` from :func:`distribution_inputs` (detached values are enough).
    :return: ``(N, d, k)``.
    """
    z = z.detach()
    dist = policy.action_dist
    n, d = z.shape
    if isinstance(dist, DiagGaussianDistribution):
        inv_std = th.exp(-policy.log_std.detach().to(z.dtype)).expand(d)
        return th.diag_embed(inv_std).expand(n, d, d)
    if isinstance(dist, BernoulliDistribution):
        p = th.sigmoid(z)
        return th.diag_embed(th.sqrt(p * (1 - p)))
    if isinstance(dist, CategoricalDistribution):
        return _categorical_factor(z)
    if isinstance(dist, MultiCategoricalDistribution):
        blocks = [_categorical_factor(chunk) for chunk in th.split(z, list(dist.action_dims), dim=1)]
        return _batched_block_diag(blocks)
    raise NotImplementedError(closed_form_fisher_problem(policy))


def _categorical_factor(logits: th.Tensor) -> th.Tensor:
    p = th.softmax(logits, dim=1)
    if p.shape[1] == 2:  # rank one: p0 p1 [1, -1] [1, -1]^T
        col = th.sqrt(p[:, 0] * p[:, 1])
        return th.stack([col, -col], dim=1).unsqueeze(2)
    s = th.sqrt(p)
    return th.diag_embed(s) - p.unsqueeze(2) * s.unsqueeze(1)


def _batched_block_diag(blocks: list[th.Tensor]) -> th.Tensor:
    n = blocks[0].shape[0]
    rows = sum(b.shape[1] for b in blocks)
    cols = sum(b.shape[2] for b in blocks)
    out = blocks[0].new_zeros(n, rows, cols)
    r = c = 0
    for b in blocks:
        out[:, r : r + b.shape[1], c : c + b.shape[2]] = b
        r += b.shape[1]
        c += b.shape[2]
    return out


def flat_to_params(flat: th.Tensor, params: list[nn.Parameter]) -> list[th.Tensor]:
    """Split a flat vector into views shaped like ``params``."""
    out, start = [], 0
    for p in params:
        out.append(flat[start : start + p.numel()].view_as(p))
        start += p.numel()
    return out


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


class _Layer:
    """One ``nn.Linear`` of the actor: inputs ``a`` (N, in), sensitivities ``delta`` (k N, out), parameter slots."""

    def __init__(self, module: nn.Linear, inputs: th.Tensor, output: th.Tensor):
        self.module = module
        self.inputs = inputs
        self.output = output
        self.delta: th.Tensor
        self.weight_index = -1
        self.bias_index: int | None = None


class ExactFisher:
    """
    The exact Fisher ``F = (1/N) sum_n J_n^T M_n J_n`` of a policy's actor on ``N`` states, with exact solves.

    Vectors are flat over ``params`` (default: :func:`actor_parameters`), in that order.

    :param policy: an SB3 ``ActorCriticPolicy`` with a closed-form distribution (see :func:`closed_form_fisher_problem`).
    :param observations: the ``N`` states (tensor or dict of tensors on the policy's device).
    :param params: the actor parameters (computed when ``None``).
    :param structured: ``None``: use the per-layer factorisation when the actor network is made of ``nn.Linear``
        layers only, else per-sample Jacobians from ``torch.func``; ``True``/``False`` force one of them.
    """

    def __init__(
        self,
        policy: ActorCriticPolicy,
        observations: Any,
        params: list[nn.Parameter] | None = None,
        structured: bool | None = None,
    ):
        problem = closed_form_fisher_problem(policy)
        if problem is not None:
            raise NotImplementedError(problem)
        self.policy = policy
        self.obs = observations
        self.params = params if params is not None else [p for _, p in actor_parameters(policy, observations)]
        log_std = getattr(policy, "log_std", None) if isinstance(policy.action_dist, DiagGaussianDistribution) else None
        self.log_std_index: int | None = None
        for i, p in enumerate(self.params):
            if log_std is not None and p is log_std:
                self.log_std_index = i
        self.net_indices = [i for i in range(len(self.params)) if i != self.log_std_index]
        self.sizes = [p.numel() for p in self.params]
        self.offsets = [0]
        for size in self.sizes:
            self.offsets.append(self.offsets[-1] + size)
        self.n_params = self.offsets[-1]
        self.n_net_params = sum(self.sizes[i] for i in self.net_indices)
        # net-space offsets (the flat vector without log_std)
        self.net_offsets: dict[int, int] = {}
        start = 0
        for i in self.net_indices:
            self.net_offsets[i] = start
            start += self.sizes[i]

        self.layers: list[_Layer] | None = None
        z = self._forward_with_hooks() if structured in (None, True) else None
        if self.layers is None and structured:
            raise ValueError("The actor network is not made of nn.Linear layers only; use structured=None.")
        if z is None:
            with th.no_grad():
                z = distribution_inputs(policy, observations)
        self.n_states, self.dim = z.shape
        self.factor = distribution_fisher_factor(policy, z)  # (N, d, k)
        self.k = self.factor.shape[2]
        self.n_directions = self.n_states * self.k
        self.dtype = self.factor.dtype
        self.device = self.factor.device
        self._dense: th.Tensor | None = None  # U^T of the generic path, computed on first use
        if self.layers is not None:
            self._backprop_sensitivities(z)

    @property
    def structured(self) -> bool:
        """Whether the per-layer factorisation is used (else per-sample Jacobians)."""
        return self.layers is not None

    @property
    def _ut(self) -> th.Tensor | None:
        if self.layers is not None:
            return None
        if self._dense is None:
            self._dense = self._jacobian_u()
        return self._dense

    # ------------------------------------------------------------------ construction

    def _forward_with_hooks(self) -> th.Tensor | None:
        records: dict[nn.Linear, list[tuple[th.Tensor, th.Tensor]]] = {}
        handles = []

        def hook(module: nn.Module, inputs: tuple[th.Tensor, ...], output: th.Tensor) -> None:
            records.setdefault(module, []).append((inputs[0], output))  # type: ignore[arg-type]  # registered on nn.Linear only

        for module in self.policy.modules():
            if isinstance(module, nn.Linear):
                handles.append(module.register_forward_hook(hook))
        try:
            z = distribution_inputs(self.policy, self.obs)
        finally:
            for handle in handles:
                handle.remove()
        index = {id(p): i for i, p in enumerate(self.params)}
        layers, covered = [], set()
        for module, calls in records.items():
            w_idx = index.get(id(module.weight))
            b_idx = index.get(id(module.bias)) if module.bias is not None else None
            if w_idx is None and b_idx is None:
                continue  # frozen layer: it only carries sensitivities
            if w_idx is None or len(calls) != 1 or calls[0][0].dim() != 2 or (module.bias is not None and b_idx is None):
                return z  # shared, partly frozen or not a plain (N, in) layer: use the generic path
            layer = _Layer(module, calls[0][0].detach(), calls[0][1])
            layer.weight_index, layer.bias_index = w_idx, b_idx
            layers.append(layer)
            covered.update({w_idx} | ({b_idx} if b_idx is not None else set()))
        if covered != set(self.net_indices):
            return z  # some actor parameters live outside nn.Linear layers
        self.layers = layers
        return z

    def _backprop_sensitivities(self, z: th.Tensor) -> None:
        assert self.layers is not None
        outputs = [layer.output for layer in self.layers]
        directions = self.factor.permute(2, 0, 1).contiguous()  # (k, N, d): index (j, n)
        try:
            grads = th.autograd.grad(z, outputs, grad_outputs=directions, is_grads_batched=True, retain_graph=True)
        except RuntimeError:  # an op without a batching rule: one backward pass per direction
            per_dir = [th.autograd.grad(z, outputs, grad_outputs=directions[j], retain_graph=True) for j in range(self.k)]
            grads = tuple(th.stack([g[i] for g in per_dir]) for i in range(len(outputs)))
        for layer, grad in zip(self.layers, grads, strict=True):
            layer.delta = grad.detach().reshape(self.n_directions, -1)
            layer.output = None  # type: ignore[assignment]  # free the graph

    def _jacobian_u(self) -> th.Tensor:
        """Dense ``U^T`` (Nk x P_net) from per-sample Jacobians (``torch.func``)."""
        from torch.func import functional_call, jacrev, vmap

        head = _ActorHead(self.policy)
        names = {id(p): "policy." + name for name, p in self.policy.named_parameters()}
        net = {names[id(self.params[i])]: self.params[i].detach() for i in self.net_indices}

        def single(params: dict[str, th.Tensor], obs: Any) -> th.Tensor:
            batched = {k: v.unsqueeze(0) for k, v in obs.items()} if isinstance(obs, dict) else obs.unsqueeze(0)
            return functional_call(head, params, (batched,), strict=False)[0]

        jac = vmap(jacrev(single), in_dims=(None, 0))(net, self.obs)
        blocks = [jac[names[id(self.params[i])]].reshape(self.n_states, self.dim, -1) for i in self.net_indices]
        jmat = th.cat(blocks, dim=2).to(self.dtype)  # (N, d, P_net)
        return th.einsum("ndk,ndp->knp", self.factor, jmat).reshape(self.n_directions, self.n_net_params)

    # ------------------------------------------------------------------ products

    def _split_net(self, v_net: th.Tensor) -> dict[int, th.Tensor]:
        return {i: v_net[self.net_offsets[i] : self.net_offsets[i] + self.sizes[i]] for i in self.net_indices}

    def split(self, v: th.Tensor) -> tuple[th.Tensor, th.Tensor | None]:
        """A flat parameter vector as (network part, log_std part or ``None``)."""
        if self.log_std_index is None:
            return v, None
        parts = [v[self.offsets[i] : self.offsets[i + 1]] for i in self.net_indices]
        ls = v[self.offsets[self.log_std_index] : self.offsets[self.log_std_index + 1]]
        return th.cat(parts), ls

    def join(self, v_net: th.Tensor, v_ls: th.Tensor | None) -> th.Tensor:
        """Inverse of :meth:`split`."""
        if self.log_std_index is None:
            return v_net
        assert v_ls is not None, "a policy with a log_std parameter needs its part of the vector"
        out = v_net.new_zeros(self.n_params)
        for i in self.net_indices:
            out[self.offsets[i] : self.offsets[i + 1]] = v_net[self.net_offsets[i] : self.net_offsets[i] + self.sizes[i]]
        out[self.offsets[self.log_std_index] : self.offsets[self.log_std_index + 1]] = v_ls
        return out

    def ut(self, v_net: th.Tensor) -> th.Tensor:
        """``U^T v`` (Nk,) for a network-space vector ``v`` (P_net,)."""
        if self._ut is not None:
            return self._ut @ v_net
        assert self.layers is not None
        parts = self._split_net(v_net)
        out = v_net.new_zeros(self.k, self.n_states)
        for layer in self.layers:
            y = layer.inputs @ parts[layer.weight_index].view_as(layer.module.weight).T
            if layer.bias_index is not None:
                y = y + parts[layer.bias_index]
            out += (layer.delta.view(self.k, self.n_states, -1) * y).sum(-1)
        return out.reshape(-1)

    def u(self, c: th.Tensor) -> th.Tensor:
        """``U c`` (P_net,) for a sample-space vector ``c`` (Nk,)."""
        if self._ut is not None:
            return self._ut.T @ c
        assert self.layers is not None
        out = c.new_zeros(self.n_net_params)
        parts = self._split_net(out)
        for layer in self.layers:
            dc = (layer.delta.view(self.k, self.n_states, -1) * c.view(self.k, self.n_states, 1)).sum(0)  # (N, out)
            parts[layer.weight_index].copy_((dc.T @ layer.inputs).reshape(-1))
            if layer.bias_index is not None:
                parts[layer.bias_index].copy_(dc.sum(0))
        return out

    def gram(self) -> th.Tensor:
        """``U^T U`` (Nk x Nk), index ``j * N + n`` for direction ``j`` of state ``n``."""
        if self._ut is not None:
            return self._ut @ self._ut.T
        assert self.layers is not None
        n, k = self.n_states, self.k
        gram = th.zeros(n * k, n * k, dtype=self.dtype, device=self.device)
        g4 = gram.view(k, n, k, n)
        for layer in self.layers:
            act = layer.inputs @ layer.inputs.T
            if layer.bias_index is not None:
                act = act + 1.0
            dd = (layer.delta @ layer.delta.T).view(k, n, k, n)
            g4.addcmul_(dd, act.view(1, n, 1, n))
        return gram

    def dense_ut(self) -> th.Tensor:
        """``U^T`` (Nk x P_net) as a dense matrix."""
        if self._ut is not None:
            return self._ut
        assert self.layers is not None
        out = th.zeros(self.n_directions, self.n_net_params, dtype=self.dtype, device=self.device)
        for layer in self.layers:
            a = layer.inputs.repeat(self.k, 1)
            start = self.net_offsets[layer.weight_index]
            w = (layer.delta.unsqueeze(2) * a.unsqueeze(1)).reshape(self.n_directions, -1)
            out[:, start : start + w.shape[1]] = w
            if layer.bias_index is not None:
                start = self.net_offsets[layer.bias_index]
                out[:, start : start + layer.delta.shape[1]] = layer.delta
        return out

    def matrix(self) -> th.Tensor:
        """The dense Fisher (P x P), in the order of ``params``."""
        ut = self.dense_ut()
        f_net = ut.T @ ut / self.n_states
        if self.log_std_index is None:
            return f_net
        idx = th.cat([th.arange(self.offsets[i], self.offsets[i + 1]) for i in self.net_indices]).to(self.device)
        full = th.zeros(self.n_params, self.n_params, dtype=self.dtype, device=self.device)
        full[idx.unsqueeze(1), idx.unsqueeze(0)] = f_net
        ls = th.arange(self.offsets[self.log_std_index], self.offsets[self.log_std_index + 1], device=self.device)
        full[ls, ls] = 2.0
        return full

    def matvec(self, v: th.Tensor) -> th.Tensor:
        """``F v`` (matrix-free)."""
        v_net, v_ls = self.split(v)
        return self.join(self.u(self.ut(v_net)) / self.n_states, None if v_ls is None else 2.0 * v_ls)

    # ------------------------------------------------------------------ solves

    def memory_bytes(self, space: str) -> int:
        """Peak extra memory of an exact solve in ``space`` (``"samples"`` or ``"parameters"``)."""
        return self.estimate_memory(space, self.n_directions, self.n_net_params, self.dtype.itemsize, self.structured)

    @staticmethod
    def estimate_memory(space: str, n_directions: int, n_params: int, itemsize: int, structured: bool) -> int:
        """Memory estimate of an exact solve, from the sizes alone (before anything is computed)."""
        nk, p = n_directions, n_params
        dense_u = 0 if (structured and space == "samples") else nk * p
        square = nk * nk if space == "samples" else p * p
        return itemsize * (3 * square + dense_u)

    def cheaper_space(self) -> str:
        """``"samples"`` when ``Nk <= P_net`` (Woodbury), else ``"parameters"``."""
        return "samples" if self.n_directions <= self.n_net_params else "parameters"

    def subset(self, idx: th.Tensor) -> ExactFisher:
        """The exact Fisher of the states ``idx`` (a 1-D index tensor) among these ``N``.

        Structured path: the stored activations and sensitivities are indexed, no new forward or backward pass;
        generic path: the rows of the dense ``U^T``.
        """
        idx = th.as_tensor(idx, device=self.device).reshape(-1)
        out = copy.copy(self)
        out.obs = {key: value[idx] for key, value in self.obs.items()} if isinstance(self.obs, dict) else self.obs[idx]
        out.n_states = len(idx)
        out.n_directions = out.n_states * self.k
        out.factor = self.factor[idx]
        if self.layers is not None:
            layers = []
            for layer in self.layers:
                sub = copy.copy(layer)
                sub.inputs = layer.inputs[idx]
                sub.delta = layer.delta.view(self.k, self.n_states, -1)[:, idx].reshape(out.n_directions, -1)
                layers.append(sub)
            out.layers = layers
        else:
            ut = self._ut
            assert ut is not None
            out._dense = ut.view(self.k, self.n_states, -1)[:, idx].reshape(out.n_directions, -1)
        return out

    def factorize(
        self, damping: float, space: str = "auto", dtype: th.dtype | None = None
    ) -> Callable[[th.Tensor], th.Tensor]:
        """Factorise ``F + damping I`` once (Cholesky); returns ``v -> (F + damping I)^-1 v``.

        :param damping: ``> 0``.
        :param space: ``"samples"`` (Woodbury, ``Nk x Nk``), ``"parameters"`` (``P x P``) or ``"auto"``: the smaller.
        :param dtype: dtype of the factorisation (default: the policy's).
        """
        if not damping > 0:
            raise ValueError(f"The exact Fisher solve needs damping > 0, got {damping!r}.")
        space = self.cheaper_space() if space == "auto" else space
        dtype = dtype or self.dtype
        if space == "samples":
            mat = self.gram().to(dtype)
            mat.diagonal().add_(self.n_states * damping)
        elif space == "parameters":
            ut = self.dense_ut().to(dtype)
            mat = ut.T @ ut
            mat /= self.n_states
            mat.diagonal().add_(damping)
        else:
            raise ValueError(f"space must be 'samples', 'parameters' or 'auto', got {space!r}")
        chol = _cholesky(mat)

        def solve(g: th.Tensor) -> th.Tensor:
            g_net, g_ls = self.split(g)
            if space == "samples":
                c = _cholesky_apply(chol, self.ut(g_net)).to(self.dtype)
                x_net = (g_net - self.u(c)) / damping
            else:
                x_net = _cholesky_apply(chol, g_net).to(self.dtype)
            return self.join(x_net, None if g_ls is None else g_ls / (2.0 + damping))

        return solve

    def solve(self, g: th.Tensor, damping: float, space: str = "auto", dtype: th.dtype | None = None) -> th.Tensor:
        """Solve ``(F + damping I) x = g`` exactly (Cholesky).

        :param g: flat vector over ``params``.
        :param damping: ``> 0``.
        :param space: ``"samples"`` (Woodbury, ``Nk x Nk``), ``"parameters"`` (``P x P``) or ``"auto"``: the smaller.
        :param dtype: dtype of the factorisation (default: the policy's).
        """
        return self.factorize(damping, space=space, dtype=dtype)(g)


class _ActorHead(nn.Module):
    """The policy as a module whose forward is :func:`distribution_inputs` (for ``torch.func.functional_call``)."""

    def __init__(self, policy: ActorCriticPolicy):
        super().__init__()
        self.policy = policy

    def forward(self, obs: Any) -> th.Tensor:
        return distribution_inputs(self.policy, obs)


def _cholesky(mat: th.Tensor) -> th.Tensor:
    """Lower Cholesky factor; retried in float64 when ``mat`` is not numerically positive definite in its dtype."""
    chol, info = th.linalg.cholesky_ex(mat)
    if int(info) != 0:
        chol, info = th.linalg.cholesky_ex(mat.double())
        if int(info) != 0:
            raise RuntimeError("The damped Fisher is not numerically positive definite; increase the damping.")
    return chol


def _cholesky_apply(chol: th.Tensor, rhs: th.Tensor) -> th.Tensor:
    return th.cholesky_solve(rhs.to(chol.dtype).unsqueeze(1), chol).squeeze(1).to(rhs.dtype)
