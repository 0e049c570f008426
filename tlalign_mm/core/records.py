"""What a recorded forward records: plain data, in the order computed.

Labels never change tokens, so a backbone's forward can run untouched while
forward hooks record, per block, what its attention computes; the rule is
then applied to the records by :func:`tlalign_mm.core.align`. A record
holds tensors the forward computed anyway (detached views: autograd saves
them for the backward), never labels. The kinds, in the order a forward
yields them:

- :class:`TokenStep`: a module made new tokens (patch merging, pooling, a
  pyramid stage's patch embedding): the labels go through its rule.
- :class:`Attention`: a block's attention starts; its queries and keys (or
  the probabilities it computed), scale and additive bias.
- :class:`Keys`: the keys of the attention just recorded, when a family
  records them apart from the queries (timm's ``k_norm``).
- a key map (``to_keys``/``to_queries``, e.g. Swin's windows, PVT's spatial
  reduction): how the labels of the tokens become the labels of the
  attention's keys, and its output the tokens' again.
- :class:`DropPath`: the block's attention branch drop-path decision.
- :class:`HeadInput`: the head reads the tokens of this point (pyramids).

Every record of a block follows its :class:`Attention` record and precedes
the next block's (hooks fire in the order the forward calls the modules).
"""
from typing import Callable, NamedTuple, Optional, Tuple, Union

import torch

from .attention import head_mean_attention, mean_probs_attention
from .token_labels import label_map_of


class Attention(NamedTuple):
    """One block's attention, as the block computes it.

    Attributes:
        q, k (Tensor, optional): ``(B', H, N, d)`` and ``(B', H, M, d)``,
            as the attention uses them (after qk-norm).
        scale (float | Tensor, optional): the logits scale (``(H,)`` for a
            learned per-head one); default ``d ** -0.5``.
        bias (Tensor, optional): additive logits bias (relative position
            bias, masks), broadcastable to ``(B', H, N, M)``.
        probs (Tensor, optional): ``(B', H, N, M)`` softmax output (or its
            head mean ``(B', N, M)``), before attention dropout, for blocks
            that compute it themselves; then q and k are not needed.
    """
    q: Optional[torch.Tensor] = None
    k: Optional[torch.Tensor] = None
    scale: Union[float, torch.Tensor, None] = None
    bias: Optional[torch.Tensor] = None
    probs: Optional[torch.Tensor] = None

    def attend(self, keys: torch.Tensor, with_mass: bool = False,
               impl: str = 'auto'):
        """``(Ā Y, m)`` for the labels ``keys`` ``(B', M, S)`` of the
        keys (see :func:`~tlalign_mm.core.head_mean_attention`)."""
        if self.probs is not None:
            attended = mean_probs_attention(self.probs, keys)
            return attended, (attended.sum(-1, keepdim=True) if with_mass
                              else None)
        return head_mean_attention(self.q, self.k, keys, self.bias,
                                   self.scale, impl, with_mass)


class Keys(NamedTuple):
    """The keys ``(B', H, M, d)`` of the :class:`Attention` just
    recorded, recorded apart from its queries."""
    k: torch.Tensor


class DropPath(NamedTuple):
    """``keep`` ``(B, 1, 1)`` bool: ``False`` where the block's attention
    branch was dropped (its drop-path output is all zeros)."""
    keep: torch.Tensor


class HeadInput(NamedTuple):
    """The head reads the tokens at this point (a pyramid's last output
    stage), not the last block's."""


class TokenStep(NamedTuple):
    """A module made tokens from an ``hw`` map of tokens.

    Attributes:
        hw (tuple): ``(H, W)`` of the map it read.
        rule (Callable): ``(B, S, H, W)`` label map -> ``(B, N', S)``
            labels of the tokens it made.
        name (str): the module's class, for messages.
    """
    hw: Tuple[int, int]
    rule: Callable[[torch.Tensor], torch.Tensor]
    name: str = ''

    def labels(self, labels: torch.Tensor) -> torch.Tensor:
        H, W = self.hw
        if labels.shape[1] != H * W:
            raise RuntimeError(
                f'{self.name} read a {H}x{W} map but the labels hold '
                f'{labels.shape[1]} tokens.')
        return self.rule(label_map_of(labels, self.hw))


def is_key_map(record) -> bool:
    """Whether ``record`` maps token labels to an attention's keys."""
    return hasattr(record, 'to_keys') and hasattr(record, 'to_queries')
