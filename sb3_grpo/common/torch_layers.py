"""
Features extractors for observations that are token sequences, usable by every algorithm of this package and of
SB3 (PPO, ...) through ``policy_kwargs``::

    from sb3_grpo.common.torch_layers import TokenSequenceExtractor

    model = GRPO(
        "MlpPolicy",
        "sb3_grpo/Arithmetic-v0",
        policy_kwargs=dict(
            features_extractor_class=TokenSequenceExtractor,
            features_extractor_kwargs=dict(sequence_model="gru", embed_dim=32, hidden_dim=64),
        ),
    )

An observation is a sequence of ``L`` token ids: a ``MultiDiscrete`` space (one entry per position, the vocabulary
is ``max(nvec)`` tokens) or a one-dimensional ``Box`` of integer values in ``0..high`` (vocabulary ``high.max() +
1``). SB3 one-hot encodes ``MultiDiscrete`` observations before a features extractor sees them
(``stable_baselines3.common.preprocessing.preprocess_obs``); the extractor reads the token ids back from the one-hot
blocks (an exact ``argmax`` per position), so nothing has to be switched off. It accepts the ids themselves too
(a ``(batch, L)`` tensor), for calling it by hand.

Each id goes through a learned embedding, then a small sequence model, and the sequence model's outputs are pooled
into the features:

- ``sequence_model="gru"``: a GRU over the positions left to right (``hidden_dim`` units per layer).
- ``sequence_model="transformer"``: a tiny causal transformer (pre-norm blocks of causal self-attention and a
  feed-forward layer of ``hidden_dim`` units, learned position embeddings, width ``embed_dim``).

``pooling="last"`` keeps the output at the last position (it has read the whole sequence in both models),
``"mean"`` averages the positions, ``"flatten"`` concatenates them.
"""

from __future__ import annotations

import math

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

__all__ = ["SEQUENCE_MODELS", "CausalSelfAttentionBlock", "TokenSequenceExtractor", "token_space_info"]

SEQUENCE_MODELS = ("gru", "transformer")
POOLINGS = ("last", "mean", "flatten")


def token_space_info(observation_space: spaces.Space) -> tuple[int, int]:
    """Sequence length and vocabulary size of a token-sequence observation space.

    :param observation_space: a one-dimensional ``MultiDiscrete``, or a one-dimensional ``Box`` whose bounds are
        finite, with ``low >= 0`` (integer ids ``0..high``).
    :return: ``(sequence_length, vocab_size)``.
    """
    if isinstance(observation_space, spaces.MultiDiscrete):
        nvec = np.asarray(observation_space.nvec)
        if nvec.ndim != 1:
            raise ValueError(
                f"TokenSequenceExtractor needs a one-dimensional MultiDiscrete (a sequence of tokens), got nvec of "
                f"shape {nvec.shape}: flatten the observation (gymnasium.wrappers.FlattenObservation)."
            )
        return len(nvec), int(nvec.max())
    if isinstance(observation_space, spaces.Box):
        if len(observation_space.shape) != 1:
            raise ValueError(
                f"TokenSequenceExtractor needs a one-dimensional Box of token ids, got shape {observation_space.shape}."
            )
        low, high = np.asarray(observation_space.low), np.asarray(observation_space.high)
        if not (np.all(np.isfinite(high)) and np.all(low >= 0)):
            raise ValueError(
                "TokenSequenceExtractor reads a Box as integer token ids: its bounds must be finite with low >= 0 "
                f"(got low={low.min()}, high={high.max()}); use a MultiDiscrete observation space instead."
            )
        return observation_space.shape[0], int(np.floor(high.max())) + 1
    raise TypeError(
        "TokenSequenceExtractor needs token sequences: a MultiDiscrete or a one-dimensional Box of integer ids, "
        f"got {type(observation_space).__name__}."
    )


def _is_transformed(tensor: th.Tensor) -> bool:
    """Whether ``tensor`` is wrapped by a ``torch.func`` transform (vmap, grad, jacrev)."""
    is_wrapped = getattr(th._C._functorch, "is_functorch_wrapped_tensor", None)
    return bool(is_wrapped(tensor)) if is_wrapped is not None else False


class CausalSelfAttentionBlock(nn.Module):
    """A pre-norm transformer block: ``x + attn(ln(x))`` then ``x + ff(ln(x))``, attention masked causally.

    :param embed_dim: width of the residual stream.
    :param n_heads: attention heads (must divide ``embed_dim``).
    :param hidden_dim: units of the feed-forward layer.
    :param max_length: longest sequence it will see.
    """

    def __init__(self, embed_dim: int, n_heads: int, hidden_dim: int, max_length: int):
        super().__init__()
        if embed_dim % n_heads:
            raise ValueError(f"n_heads ({n_heads}) must divide embed_dim ({embed_dim})")
        self.n_heads = n_heads
        self.norm_attention = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)
        self.norm_ff = nn.LayerNorm(embed_dim)
        self.ff = nn.Sequential(nn.Linear(embed_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, embed_dim))
        self.causal_mask: th.Tensor
        self.register_buffer("causal_mask", th.ones(max_length, max_length, dtype=th.bool).triu(1), persistent=False)

    def forward(self, x: th.Tensor) -> th.Tensor:
        """:param x: ``(batch, length, embed_dim)``. :return: the same shape."""
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm_attention(x)).split(width, dim=-1)
        q, k, v = (t.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2) for t in (q, k, v))
        # Written out rather than F.scaled_dot_product_attention: its CPU kernel has no double backward, which the
        # Fisher-vector products of TRPO (conjugate gradients) need, and these sequences are a handful of tokens.
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(width // self.n_heads)
        scores = scores.masked_fill(self.causal_mask[:length, :length], float("-inf"))
        attended = scores.softmax(dim=-1) @ v
        x = x + self.out(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.ff(self.norm_ff(x))


class TokenSequenceExtractor(BaseFeaturesExtractor):
    """
    Embedding + a small sequence model (GRU or tiny causal transformer) over token-sequence observations.

    See the module docstring for the spaces it reads and how. Features have ``hidden_dim`` (GRU) or ``embed_dim``
    (transformer) entries, times the sequence length with ``pooling="flatten"``.

    :param observation_space: a ``MultiDiscrete`` or a one-dimensional ``Box`` of integer token ids.
    :param sequence_model: ``"gru"`` or ``"transformer"``.
    :param embed_dim: size of the token embeddings (the transformer's width).
    :param hidden_dim: the GRU's hidden size; the transformer's feed-forward size.
    :param n_layers: GRU layers or transformer blocks.
    :param n_heads: attention heads of the transformer (must divide ``embed_dim``).
    :param pooling: ``"last"`` (output at the last position), ``"mean"`` (mean over positions) or ``"flatten"``
        (every position's output, concatenated).
    :param vocab_size: number of distinct token ids (default: from the observation space).
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        sequence_model: str = "gru",
        embed_dim: int = 32,
        hidden_dim: int = 64,
        n_layers: int = 1,
        n_heads: int = 2,
        pooling: str = "last",
        vocab_size: int | None = None,
    ):
        if sequence_model not in SEQUENCE_MODELS:
            raise ValueError(f"sequence_model must be one of {SEQUENCE_MODELS}, got {sequence_model!r}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        for name, value in (("embed_dim", embed_dim), ("hidden_dim", hidden_dim), ("n_layers", n_layers)):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        length, space_vocab = token_space_info(observation_space)
        if vocab_size is not None and vocab_size < space_vocab:
            raise ValueError(f"vocab_size={vocab_size} is smaller than the observation space's {space_vocab} tokens")
        width = hidden_dim if sequence_model == "gru" else embed_dim
        super().__init__(observation_space, width * length if pooling == "flatten" else width)
        self.sequence_model = sequence_model
        self.pooling = pooling
        self.sequence_length = length
        self.vocab_size = int(vocab_size or space_vocab)
        self._nvec: list[int] | None = None
        if isinstance(observation_space, spaces.MultiDiscrete):
            self._nvec = [int(n) for n in observation_space.nvec]

        self.embedding = nn.Embedding(self.vocab_size, embed_dim)
        self.gru: nn.GRU | None = None
        self.position: nn.Parameter | None = None
        self.blocks = nn.ModuleList()
        self.final_norm: nn.Module = nn.Identity()
        if sequence_model == "gru":
            self.gru = nn.GRU(embed_dim, hidden_dim, num_layers=n_layers, batch_first=True)
        else:
            self.position = nn.Parameter(0.02 * th.randn(length, embed_dim))
            self.blocks.extend(CausalSelfAttentionBlock(embed_dim, n_heads, hidden_dim, length) for _ in range(n_layers))
            self.final_norm = nn.LayerNorm(embed_dim)

    def token_ids(self, observations: th.Tensor) -> th.Tensor:
        """The ``(batch, L)`` token ids of a batch: SB3's one-hot encoding of a MultiDiscrete, ids, or a float Box."""
        if self._nvec is not None and observations.shape[-1] == sum(self._nvec) != self.sequence_length:
            if len(set(self._nvec)) == 1:
                ids = observations.view(-1, self.sequence_length, self._nvec[0]).argmax(dim=-1)
            else:
                ids = th.stack([block.argmax(dim=-1) for block in observations.split(self._nvec, dim=-1)], dim=-1)
        elif observations.shape[-1] == self.sequence_length:
            ids = observations.round().long() if observations.is_floating_point() else observations.long()
        else:
            raise ValueError(
                f"expected {self.sequence_length} token ids (or their one-hot encoding) per observation, got a "
                f"tensor of shape {tuple(observations.shape)}"
            )
        # One-hot blocks give ids in range by construction; a Box is checked (not under torch.func transforms such as
        # the vmap of ExactTRPO's per-sample Jacobians, where a value cannot be read).
        if (
            self._nvec is None
            and ids.numel()
            and not _is_transformed(ids)
            and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size)
        ):
            raise ValueError(
                f"token ids must lie in 0..{self.vocab_size - 1}, got {int(ids.min())}..{int(ids.max())}: "
                "pass a larger vocab_size in features_extractor_kwargs."
            )
        return ids.reshape(-1, self.sequence_length)

    def forward(self, observations: th.Tensor) -> th.Tensor:
        x = self.embedding(self.token_ids(observations))  # (batch, L, embed_dim)
        if self.gru is not None:
            # An explicit initial state derived from x: the GRU's own zeros are not batched under torch.func's vmap.
            h0 = th.zeros_like(x[:, 0, :1]).expand(-1, self.gru.hidden_size)
            x, _ = self.gru(x, h0.unsqueeze(0).repeat(self.gru.num_layers, 1, 1))
        else:
            assert self.position is not None
            x = x + self.position
            for block in self.blocks:
                x = block(x)
            x = self.final_norm(x)
        if self.pooling == "last":
            return x[:, -1]
        if self.pooling == "mean":
            return x.mean(dim=1)
        return x.flatten(start_dim=1)

    def extra_repr(self) -> str:
        return f"sequence_model={self.sequence_model!r}, pooling={self.pooling!r}, length={self.sequence_length}"
