"""Attention whose queries are not the tokens it is given: pooled queries
(MViTv2's pooling attention), a strided subsample of them (LeViT's
subsampling attention) or a subset of them (XCiT's class attention).

The paper's rule ``Y <- (Y + Ā Y) / 2`` assumes a block's output token
``i`` is its input token ``i`` plus what its query ``i`` attends to. Here
the output tokens are the queries', so the rule follows what flows into
each of them (docs/design.md, "Pooled and subset queries"):

- **Pooled queries** (:class:`PooledQueries`). Output token ``i`` is made
  from a window of input tokens, ``x'_i = (P_s x)_i + Attn(P_q x, P_k x,
  P_k x)_i``: its residual part carries the mean label of its window
  (``P_s Y``, the token-making rule), its attention part what it attends
  to, ``Ā (P_k Y)`` (a key's and value's label: its window's mean), so the
  residual average is ``Y' = (P_s Y + M Y) / 2``, ``M Y = Ā (P_k Y)``.
  Where the attention also adds its pooled queries to its output (MViTv2's
  residual pooling, ``Attn + P_q x``, a residual connection inside the
  branch), ``M Y = (P_q Y + Ā (P_k Y)) / 2``. A block with no residual
  (LeViT's ``AttentionSubsample``: ``x' = Attn(S x, x, x)``, ``S`` a
  strided selection) moves labels by ``Y' = Ā Y``.
- **A subset of queries** (:class:`QuerySubset`). Only the first ``count``
  tokens query (the class token, keys: every token); they move by the
  paper's rule, ``Y'_c = (Y_c + Ā Y) / 2``, the others pass unchanged.

Each class says how the labels of the block's input tokens become those of
its keys (``to_keys``), of the tokens its queries become (``own``: their
labels where the block does not move them), of its pooled queries
(``pooled_queries``) and of its output tokens (``to_tokens``);
:func:`~.alignment.align` applies the rule.
"""
from typing import NamedTuple, Optional, Tuple

import torch
from torch.nn.modules.utils import _pair

from .token_labels import flatten_label_map, label_map_of, window_mean

_Pair = Tuple[int, int]


class Pool(NamedTuple):
    """The windows a convolution or pooling cuts from an ``(H, W)`` token
    map; a token it makes is labelled its window's mean over real positions
    (padding carries no label: docs/design.md, "Between attention blocks",
    rule 2), whatever it computes inside the window (a max pool included).
    """
    kernel: _Pair
    stride: _Pair
    padding: _Pair = (0, 0)

    @classmethod
    def of(cls, module) -> 'Pool':
        """The windows of an ``nn.Conv2d`` or ``nn.MaxPool2d``/``AvgPool2d``
        (undilated, ``ceil_mode=False``)."""
        if _pair(getattr(module, 'dilation', 1)) != (1, 1) or getattr(
                module, 'ceil_mode', False) or isinstance(module.padding, str):
            raise NotImplementedError(
                f'TL-Align pools labels by windows of an integer padding, '
                f'undilated, ceil_mode=False; {module} is not.')
        return cls(_pair(module.kernel_size), _pair(module.stride),
                   _pair(module.padding))

    def out_hw(self, hw: _Pair) -> _Pair:
        """The ``(h, w)`` map it makes of an ``hw`` map."""
        return tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(
            hw, self.kernel, self.stride, self.padding))

    def labels(self, labels: torch.Tensor, hw: _Pair) -> torch.Tensor:
        """``(B, H*W, S)`` -> ``(B, h*w, S)``: each window's mean label."""
        return flatten_label_map(window_mean(label_map_of(labels, hw),
                                             self.kernel, self.stride,
                                             self.padding))


def _pool(pool: Optional[Pool], labels: torch.Tensor,
          hw: _Pair) -> torch.Tensor:
    return labels if pool is None else pool.labels(labels, hw)


class PooledQueries(NamedTuple):
    """Attention over an ``hw`` token map whose queries are pooled from it,
    and whose output tokens are the queries' (the module docstring's rule).

    Attributes:
        hw (tuple): ``(H, W)`` of the block's input tokens (no extra
            tokens).
        tokens (Pool, optional): how the output tokens are made from the
            input tokens, ``P_s``: their own labels ``P_s Y`` (MViTv2: the
            skip connection's max pool; LeViT: the queries' stride
            selection, a 1x1 window); ``None``: the input tokens themselves
            (a block that keeps its map).
        residual (bool): the block adds ``P_s x`` to its attention's output
            (MViTv2: ``Y' = (P_s Y + M Y) / 2``), or not (LeViT's
            ``AttentionSubsample``: ``Y' = M Y``).
        keys (Pool, optional): ``P_k``, the pooling of the keys and values;
            ``None``: the input tokens.
        query (Pool, optional): ``P_q``, where the attention adds its pooled
            queries to its output (MViTv2's residual pooling): ``M Y = (P_q
            Y + Ā (P_k Y)) / 2``; ``None``: ``M Y = Ā (P_k Y)``.
    """
    hw: _Pair
    tokens: Optional[Pool]
    residual: bool
    keys: Optional[Pool] = None
    query: Optional[Pool] = None

    def own(self, labels: torch.Tensor) -> torch.Tensor:
        """``P_s Y``: ``(B, H*W, S)`` -> ``(B, N', S)``."""
        return _pool(self.tokens, labels, self.hw)

    def to_keys(self, labels: torch.Tensor) -> torch.Tensor:
        """``P_k Y``: the keys' (values') labels."""
        return _pool(self.keys, labels, self.hw)

    def pooled_queries(self, labels: torch.Tensor) -> Optional[torch.Tensor]:
        """``P_q Y`` where the attention adds its queries, else ``None``."""
        return None if self.query is None else self.query.labels(labels,
                                                                 self.hw)

    def to_tokens(self, labels: torch.Tensor,
                  new: torch.Tensor) -> torch.Tensor:
        """The block's output labels: the queries' own."""
        return new


class QuerySubset(NamedTuple):
    """Attention in which only the first ``count`` tokens query, every
    token a key (class attention, CaiT's and XCiT's: ``count=1``); the
    other tokens leave the block as they came (the module docstring's
    rule)."""
    count: int = 1
    residual = True

    def own(self, labels: torch.Tensor) -> torch.Tensor:
        return labels[:, :self.count]

    def to_keys(self, labels: torch.Tensor) -> torch.Tensor:
        return labels

    def pooled_queries(self, labels: torch.Tensor) -> None:
        return None

    def to_tokens(self, labels: torch.Tensor,
                  new: torch.Tensor) -> torch.Tensor:
        """The queries' new labels, then the others' unchanged."""
        return torch.cat([new, labels[:, self.count:]], 1)


#: The key maps of attention whose queries are not its tokens.
QUERY_MAPS = (PooledQueries, QuerySubset)
