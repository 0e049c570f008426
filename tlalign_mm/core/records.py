"""What a recorded forward records: plain data, one slot per block.

Labels never change tokens, so a backbone's forward runs untouched while
hooks record, per block, tensors its attention computes anyway (detached
views autograd saves for the backward), never labels;
:func:`tlalign_mm.core.align` applies the rule to them. Each hook knows its
block, so its records land in that :class:`Slot` whatever order they fire
in; a slot missing a part it expects is the one error.
"""
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, List, NamedTuple, Optional, Tuple, Union

import torch

from .attention import head_mean_attention, mean_probs_attention
from .key_maps import Reduction, Windows
from .queries import PooledQueries, QuerySubset
from .token_labels import label_map_of


class TokenStep(NamedTuple):
    """A module (patch merging, pooling, a stage's patch embedding) made
    tokens from the ``(H, W)`` map ``hw``; ``rule``: ``(B, S, H, W)`` label
    map -> ``(B, N', S)`` labels of its tokens; ``name``: its class.

    ``residual``: the module is a residual branch ``x + f(x)`` whose ``f``
    mixes tokens by a fixed window, not by attention (a convolution:
    docs/design.md, "Between attention blocks"); ``rule`` gives the labels
    of ``f``'s output, ``W Y``, which :func:`~.alignment.align` combines
    with the identity's as it does an attention's ``Ā Y``. ``keep``: ``(B,
    1, 1)`` bool, ``False`` where the branch's drop-path dropped the sample
    (training only)."""
    hw: Tuple[int, int]
    rule: Callable[[torch.Tensor], torch.Tensor]
    name: str = ''
    residual: bool = False
    keep: Optional[torch.Tensor] = None

    def labels(self, labels: torch.Tensor) -> torch.Tensor:
        H, W = self.hw
        if labels.shape[1] != H * W:
            raise RuntimeError(
                f'{self.name} read a {H}x{W} map but the labels hold '
                f'{labels.shape[1]} tokens.')
        return self.rule(label_map_of(labels, self.hw))


@dataclass
class Slot:
    """What one call recorded for a block: its token steps, its attention,
    key map and drop-path decision.

    Attributes:
        expects (tuple): the parts its hooks record: ``'attention'``
            (``probs``, or ``q`` and ``k``), ``'key_map'``, and ``'step'``
            once per token step.
        steps (list[TokenStep]): in the order they ran: those before
            ``attention_at`` ran before the block's attention (a merge, a
            stage's embedding), the others after it (a residual branch).
        attention_at (int, optional): how many steps had run when the
            attention was recorded; ``None``: no attention recorded (every
            step runs before the block).
        q, k, scale, bias: as :func:`~.attention.head_mean_attention` takes
            them (``(B', H, N, d)``, ``(B', H, M, d)``).
        probs (Tensor): ``(B', H, N, M)`` softmax output (or its head mean),
            before attention dropout, where a block computes it itself.
        key_map: how token labels become the keys' (:mod:`.key_maps`), or
            a block's queries are not its tokens (:mod:`.queries`).
        keep (Tensor): ``(B, 1, 1)`` bool, ``False`` where the attention
            branch's drop-path dropped the sample (training only).
    """
    expects: Tuple[str, ...] = ()
    steps: List[TokenStep] = field(default_factory=list)
    attention_at: Optional[int] = None
    q: Optional[torch.Tensor] = None
    k: Optional[torch.Tensor] = None
    scale: Union[float, torch.Tensor, None] = None
    bias: Optional[torch.Tensor] = None
    probs: Optional[torch.Tensor] = None
    key_map: Union[Windows, Reduction, PooledQueries, QuerySubset,
                   None] = None
    keep: Optional[torch.Tensor] = None

    def missing(self) -> List[str]:
        """The expected parts this call did not record."""
        have = dict(attention=int(self.probs is not None or
                                  (self.q is not None and self.k is not None)),
                    key_map=int(self.key_map is not None),
                    step=len(self.steps))
        return [part for part, count in Counter(self.expects).items()
                if have[part] < count]

    def split_steps(self) -> Tuple[List[TokenStep], List[TokenStep]]:
        """The steps that ran before the attention, and after it."""
        at = len(self.steps) if self.attention_at is None else \
            self.attention_at
        return self.steps[:at], self.steps[at:]

    def attend(self, keys: torch.Tensor, with_mass: bool = False,
               impl: str = 'auto'):
        """``(Ā Y, m)`` for the ``(B', M, S)`` labels of the keys."""
        if self.probs is not None:
            attended = mean_probs_attention(self.probs, keys)
            return attended, (attended.sum(-1, keepdim=True) if with_mass
                              else None)
        return head_mean_attention(self.q, self.k, keys, self.bias,
                                   self.scale, impl, with_mass)


class Recorded(NamedTuple):
    """One recorded forward, as :func:`tlalign_mm.core.align` takes it.

    Attributes:
        slots (list[Slot]): one per block, and one for a token step after
            the last block.
        embed (Callable): ``(B, S, H, W)`` pixel weights -> ``(B, N, S)``
            patch token labels (the patch embedding's rule).
        extra_tokens (int): tokens before the patch tokens (class,
            distillation, registers); they start at ``area_share``.
        extra_from (int): the block the extra tokens join the sequence
            before (after that slot's token steps): ``0``, from the patch
            embedding on (ViT); T2T-ViT prepends its class token after its
            T2T blocks, XCiT before its first class-attention block. They
            start at ``area_share`` whenever they join: they hold no pixel,
            and no block moved labels into them.
        head_after (tuple, optional): ``(j, through_step)``: the head reads
            the tokens after block ``j`` (and the token step after it, if
            ``through_step``); ``None``: after the last.
        readout (tuple): ``(start, stop)``: of those tokens, the head reads
            the mean of ``tokens[:, start:stop]``
            (:func:`~.token_labels.readout`): ``(0, 1)`` a class token,
            ``(extra_tokens, None)`` the patch tokens' mean.
    """
    slots: List[Slot]
    embed: Callable[[torch.Tensor], torch.Tensor]
    extra_tokens: int = 0
    head_after: Optional[Tuple[int, bool]] = None
    readout: Tuple[int, Optional[int]] = (0, None)
    extra_from: int = 0
