"""What a recorded forward records: plain data, one slot per block.

Labels never change tokens, so a backbone's forward can run untouched while
forward hooks record, per block, what its attention computes; the rule is
then applied to the records by :func:`tlalign_mm.core.align`. A record
holds tensors the forward computed anyway (detached views: autograd saves
them for the backward), never labels. Each hook knows its block, so a
block's records land in its :class:`Slot`, whatever order they fire in;
a slot missing a part it expects is the one error.
"""
from dataclasses import dataclass
from typing import Callable, List, NamedTuple, Optional, Tuple, Union

import torch

from .attention import head_mean_attention, mean_probs_attention
from .key_maps import Reduction, Windows
from .token_labels import label_map_of


class TokenStep(NamedTuple):
    """A module made tokens from an ``hw`` map of tokens (patch merging,
    pooling, a pyramid stage's patch embedding).

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


@dataclass
class Slot:
    """What one call recorded for block ``i``: the token step that ran
    before it, and its attention, key map and drop-path decision.

    Attributes:
        expects (tuple): the parts the hooks on this block record:
            ``'attention'`` (``probs``, or ``q`` and ``k``), ``'key_map'``,
            ``'step'``.
        q, k (Tensor): ``(B', H, N, d)``, ``(B', H, M, d)``, as the
            attention uses them (after qk-norm).
        scale (float | Tensor): the logits scale (``(H,)`` for a learned
            per-head one); ``None``: ``d ** -0.5``.
        bias (Tensor): additive logits bias (relative position bias,
            masks), broadcastable to ``(B', H, N, M)``.
        probs (Tensor): ``(B', H, N, M)`` softmax output (or its head mean),
            before attention dropout, where a block computes it itself.
        key_map: how token labels become the keys' (:mod:`.key_maps`).
        keep (Tensor): ``(B, 1, 1)`` bool, ``False`` where the attention
            branch's drop-path dropped the sample (training only).
    """
    expects: Tuple[str, ...] = ()
    step: Optional[TokenStep] = None
    q: Optional[torch.Tensor] = None
    k: Optional[torch.Tensor] = None
    scale: Union[float, torch.Tensor, None] = None
    bias: Optional[torch.Tensor] = None
    probs: Optional[torch.Tensor] = None
    key_map: Union[Windows, Reduction, None] = None
    keep: Optional[torch.Tensor] = None

    def missing(self) -> List[str]:
        """The expected parts this call did not record."""
        have = dict(attention=self.probs is not None or
                    (self.q is not None and self.k is not None),
                    key_map=self.key_map is not None,
                    step=self.step is not None)
        return [part for part in self.expects if not have[part]]

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


class Recorded(NamedTuple):
    """One recorded forward, as :func:`tlalign_mm.core.align` takes it.

    Attributes:
        slots (list[Slot]): one per block, and a last one for a token step
            after the last block.
        embed (Callable): ``(B, S, H, W)`` pixel weights -> ``(B, N, S)``
            labels of the patch tokens (the patch embedding's rule).
        extra_tokens (int): tokens before the patch tokens (class,
            distillation, registers); they start at ``area_share``.
        head_after (tuple, optional): ``(j, through_step)``: the head reads
            the tokens after block ``j`` (and after the token step that
            follows it, if ``through_step``); ``None``: after the last.
    """
    slots: List[Slot]
    embed: Callable[[torch.Tensor], torch.Tensor]
    extra_tokens: int = 0
    head_after: Optional[Tuple[int, bool]] = None
