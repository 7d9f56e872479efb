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
  the network, and is solved analytically;
- gSDE (``use_sde=True``): at a state the action distribution is the diagonal Gaussian ``N(mu, sigma^2)`` with
  ``sigma_i^2 = sum_j latent_j^2 std_ji^2 + epsilon`` (``std`` from ``log_std``, ``latent`` the actor's last hidden
  layer, detached unless ``learn_features``). Its Fisher in ``z = (mu, sigma)`` is ``diag(1 / sigma^2, 2 / sigma^2)``
  (no cross term), with ``z`` depending on the network and on ``log_std`` through ``sigma``; ``tanh`` squashing
  changes neither the KL nor the Fisher.

The batch Fisher is the mean over the N given states: ``F = U U^T / N`` with ``U = [J_n^T A_n]_n`` of size
``P x Nk`` (``k`` columns of ``A`` per state). ``(F + lambda I) x = g`` is solved exactly with a Cholesky
factorisation in whichever space is smaller: parameters (``P x P``) or samples (``Nk x Nk``, Woodbury identity
``(lambda I + U U^T / N)^-1 = (I - U (N lambda I + U^T U)^-1 U^T) / lambda``).

When every parameter of the actor network belongs to an ``nn.Linear`` layer (MLP actors), ``U`` is never formed
per sample: for a layer with inputs ``a`` (a 1 appended for the bias) and backpropagated output sensitivities
``delta`` (one backward pass per column of ``A``), ``U_l^T U_l = (delta delta^T) o (a a^T)`` and products with
``U`` and ``U^T`` are two small matrix products. Other actors (CNN feature extractors, ...) get their per-sample
Jacobians from ``torch.func`` (``vmap(jacrev)``, on observations preprocessed by SB3 beforehand: its one-hot
encoding of ``Discrete`` and ``MultiDiscrete`` parts cannot be vmapped), which needs ``Nk x P`` memory. cuDNN is
switched off around them on CUDA (:func:`cudnn_disabled`): its RNN kernels (``nn.GRU``, ``nn.LSTM``) have no batching
rule and read the storage of vmap's batched tensors; torch's own RNN then runs under vmap instead.

Actors whose output at a state depends on the rest of the batch (BatchNorm normalising with the batch's
statistics, in training mode) or on random draws (Dropout in training mode) are differentiated through one forward
pass over the whole batch, as the caller runs it: the rows of ``U^T`` are vector-Jacobian products of that pass
(``J_n`` then includes how the other states move state ``n``'s output), and the noise layers draw the same masks as
the caller's forward when both run under :func:`~.actor.fixed_noise` with the same seed. The policy's buffers (BatchNorm
running statistics) are left as they were.

:func:`~.solvers.conjugate_gradient` is the matrix-free alternative (zero start, so deterministic).
:func:`~.solvers.preconditioned_refinement` solves the system of a large batch's exact Fisher (matrix-free, structured
products) to a stated residual, with the exact factorisation of a subsample's Fisher as its start and
preconditioner (:meth:`ExactFisher.subset`, :meth:`ExactFisher.factorize`).
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

from sb3_grpo.exact_trpo.actor import (
    ActorHead,
    actor_parameters,
    batched_vjp,
    closed_form_fisher_problem,
    couples_states,
    distribution_inputs,
    fixed_noise,
    has_noise_layers,
    index_obs,
    preprocessed_observations,
    preserved_buffers,
)
from sb3_grpo.exact_trpo.solvers import cholesky, cholesky_apply

__all__ = [
    "FISHER_SOLVERS",
    "ExactFisher",
    "cudnn_disabled",
    "distribution_fisher_factor",
]

FISHER_SOLVERS = ("auto", "exact", "cg")
#: Elements (``rows x batch states``) of one batched vector-Jacobian product of the whole-batch path.
_VJP_CHUNK_ELEMENTS = 2**18


@contextlib.contextmanager
def cudnn_disabled(device: th.device | str) -> Iterator[None]:
    """cuDNN switched off (``torch.backends.cudnn.enabled = False``) inside the block when ``device`` is CUDA.

    The per-sample Jacobians run the actor under ``vmap``: cuDNN's RNN kernels have no batching rule and ask for the
    ``data_ptr()`` of vmap's batched tensors, which have no storage ("Cannot access data pointer of Tensor that
    doesn't have storage"); without cuDNN, torch's native RNN runs under vmap's per-sample fallback. Only the flag
    ``enabled`` changes (``torch.backends.cudnn.flags`` would also reset ``benchmark``, ``deterministic`` and the
    TF32 settings for the block), and it is restored afterwards. Elsewhere: nothing.
    """
    if th.device(device).type != "cuda":
        yield
        return
    enabled = th.backends.cudnn.enabled
    th.backends.cudnn.enabled = False
    try:
        yield
    finally:
        th.backends.cudnn.enabled = enabled


def distribution_fisher_factor(policy: ActorCriticPolicy, z: th.Tensor) -> th.Tensor:
    """``A`` with ``A_n A_n^T`` the Fisher of the action distribution in its network parameters ``z_n``.

    :param policy: the policy (its ``action_dist`` type and, for Gaussians, ``log_std``).
    :param z: ``(N, d)`` from :func:`~.actor.distribution_inputs` (detached values are enough).
    :return: ``(N, d, k)``.
    """
    z = z.detach()
    dist = policy.action_dist
    n, d = z.shape
    if isinstance(dist, StateDependentNoiseDistribution):  # z = (mean, std): diag(1 / std, sqrt(2) / std)
        inv_std = 1.0 / z[:, d // 2 :]
        return th.diag_embed(th.cat([inv_std, math.sqrt(2.0) * inv_std], dim=1))
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

    Vectors are flat over ``params`` (default: :func:`~.actor.actor_parameters`), in that order.

    :param policy: an SB3 ``ActorCriticPolicy`` with a closed-form distribution
        (see :func:`~.actor.closed_form_fisher_problem`).
    :param observations: the states (tensor or dict of tensors on the policy's device).
    :param params: the actor parameters (computed when ``None``).
    :param structured: ``None``: use the per-layer factorisation when the actor network is made of ``nn.Linear``
        layers only, else per-sample Jacobians from ``torch.func``; ``True``/``False`` force one of them.
    :param states: the ``N`` states whose Fisher is formed, as indices into ``observations`` (default: all of them).
        The actor runs on all ``observations`` at once, so where its output at a state depends on the others
        (BatchNorm in training mode, see :func:`~.actor.couples_states`) or on noise (Dropout, see
        :func:`~.actor.has_noise_layers`), each state's output is the one of that whole-batch forward pass.
    :param noise_seed: the seed of the actor's noise layers (Dropout masks), to match a forward pass the caller runs
        under :func:`~.actor.fixed_noise` with the same seed; ``None``: drawn from torch's global generator when the actor
        has active noise layers (one draw, shared by every forward pass of this Fisher).
    """

    def __init__(
        self,
        policy: ActorCriticPolicy,
        observations: Any,
        params: list[nn.Parameter] | None = None,
        structured: bool | None = None,
        states: th.Tensor | None = None,
        noise_seed: int | None = None,
    ):
        problem = closed_form_fisher_problem(policy)
        if problem is not None:
            raise NotImplementedError(problem)
        coupled = couples_states(policy)
        if structured and coupled:
            raise ValueError(
                "structured=True is impossible: a BatchNorm layer of the actor normalises with the batch's statistics, "
                "which couples the states (use structured=None)."
            )
        noisy = has_noise_layers(policy)
        if noisy and noise_seed is None:
            noise_seed = int(th.randint(2**62, ()).item())
        self.policy = policy
        self.noise_seed = noise_seed if noisy else None
        # the whole batch's forward pass defines every state's output: keep all observations, form rows `states`
        self._whole_batch = coupled or noisy
        if states is not None:
            states = th.as_tensor(states, device=policy.device).reshape(-1)
            if not self._whole_batch:
                observations, states = index_obs(observations, states), None
        self.obs = observations
        self.rows = states
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
        self._dense: th.Tensor | None = None  # U^T of the generic path, computed on first use
        with preserved_buffers(policy):  # restored after the backward passes, which may need them (BatchNorm)
            z: th.Tensor | None = None
            if structured in (None, True) and not coupled:
                with fixed_noise(self.noise_seed, policy.device):
                    z = self._forward_with_hooks()
            if self.layers is None:
                if structured:
                    raise ValueError("The actor network is not made of nn.Linear layers only; use structured=None.")
                if z is None:
                    with th.no_grad(), fixed_noise(self.noise_seed, policy.device):
                        z = distribution_inputs(policy, observations)
                z = z.detach()
            z_rows = z if self.rows is None or self.layers is not None else z[self.rows]
            self.n_states, self.dim = z_rows.shape
            self.factor = distribution_fisher_factor(policy, z_rows)  # (N, d, k)
            self.k = self.factor.shape[2]
            self.n_directions = self.n_states * self.k
            self.dtype = self.factor.dtype
            self.device = self.factor.device
            if self.layers is not None:
                self._backprop_sensitivities(z)
        if self.layers is not None and self.rows is not None:  # the whole batch's sensitivities, then the rows
            self.__dict__.update(self.subset(self.rows).__dict__)
            self.rows = None

    @property
    def structured(self) -> bool:
        """Whether the per-layer factorisation is used (else per-sample Jacobians)."""
        return self.layers is not None

    @property
    def _ut(self) -> th.Tensor | None:
        if self.layers is not None:
            return None
        if self._dense is None:
            with cudnn_disabled(self.policy.device):  # both routes differentiate batched (vmap) through the actor
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
        """Dense ``U^T`` (Nk x P_net): per-sample Jacobians (``torch.func``), or the whole-batch path's."""
        if self._whole_batch:
            return self._whole_batch_u()
        from torch.func import functional_call, jacrev, vmap

        head = ActorHead(self.policy)
        names = {id(p): "policy." + name for name, p in self.policy.named_parameters()}
        net = {names[id(self.params[i])]: self.params[i].detach() for i in self.net_indices}

        def single(params: dict[str, th.Tensor], obs: Any) -> th.Tensor:
            batched = {k: v.unsqueeze(0) for k, v in obs.items()} if isinstance(obs, dict) else obs.unsqueeze(0)
            # tie_weights=False: SB3 reaches one extractor as both features_extractor and pi_features_extractor, and
            # torch's tied-weight handling then fails to restore the policy's own nn.Parameters afterwards
            return functional_call(head, params, (batched,), strict=False, tie_weights=False)[0]

        # preprocessed once, outside vmap: SB3's one-hot encoding has no batching rule
        preprocessed = preprocessed_observations(self.policy, self.obs)
        jac = vmap(jacrev(single), in_dims=(None, 0))(net, preprocessed)
        blocks = [jac[names[id(self.params[i])]].reshape(self.n_states, self.dim, -1) for i in self.net_indices]
        jmat = th.cat(blocks, dim=2).to(self.dtype)  # (N, d, P_net)
        return th.einsum("ndk,ndp->knp", self.factor, jmat).reshape(self.n_directions, self.n_net_params)

    def _whole_batch_u(self) -> th.Tensor:
        """Dense ``U^T`` from one forward pass over all observations: row ``(j, n)`` is the gradient of
        ``A_n[:, j] . z_n`` (a vector-Jacobian product of the whole batch's output), ``n`` among the rows."""
        net = [self.params[i] for i in self.net_indices]
        out = th.empty(self.n_directions, self.n_net_params, dtype=self.dtype, device=self.device)
        with preserved_buffers(self.policy):  # restored after the backward passes, which may need them
            with fixed_noise(self.noise_seed, self.policy.device):
                z = distribution_inputs(self.policy, self.obs)
            n_all = z.shape[0]
            rows = th.arange(n_all, device=z.device) if self.rows is None else self.rows
            factor = self.factor.to(z.dtype)
            chunk = max(1, min(256, _VJP_CHUNK_ELEMENTS // n_all))
            for start in range(0, self.n_directions, chunk):
                t = th.arange(start, min(start + chunk, self.n_directions), device=z.device)
                j, m = t // self.n_states, t % self.n_states
                grad_outputs = z.new_zeros(len(t), n_all, self.dim)
                grad_outputs[th.arange(len(t), device=z.device), rows[m]] = factor[m, :, j]
                out[start : start + len(t)] = batched_vjp(z, net, grad_outputs).to(self.dtype)
        return out

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
        if self._whole_batch and self.layers is None:  # rows of the same whole-batch forward pass
            out.rows = idx if self.rows is None else self.rows[idx]
        else:
            out.obs = index_obs(self.obs, idx)
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
        chol = cholesky(mat)

        def solve(g: th.Tensor) -> th.Tensor:
            g_net, g_ls = self.split(g)
            if space == "samples":
                c = cholesky_apply(chol, self.ut(g_net)).to(self.dtype)
                x_net = (g_net - self.u(c)) / damping
            else:
                x_net = cholesky_apply(chol, g_net).to(self.dtype)
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
