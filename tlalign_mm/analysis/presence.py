"""Token presence, layer by layer (TL-Align, Eq. 2).

Token ``z_i`` entering a block contributes ``c(z_i, ẑ_j) = Ā_ji`` (the
head-averaged attention) to ``ẑ_j``; its presence is the column sum
``p(z_i) = sum_j Ā_ji``. Rows sum to 1, so presences average 1; their spread
is the token fluctuation.

``Ā`` comes from the alignment rule itself, not a re-implementation of
attention: with every cell of block ``l``'s token grid one source (the
patches, or for Swin the cells its patch merging has made) and the class
(and distillation) token(s) one more, aligning with block ``l`` only and no
residual average (``align_layers=[l]``, ``residual_norm=False``) gives
``Ā_l Y = Ā_l``. One forward per block, ``N_l + 1`` label channels; a
distilled DeiT's class and distillation tokens share one "extra" entry.
"""
import math
from typing import List, NamedTuple, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from tlalign_mm.models.aligned_forward import aligned_forward
from tlalign_mm.models.families import describe


class LayerPresence(NamedTuple):
    """Presence of the tokens entering one block: ``patches`` ``(B, N_l)``
    (spatial tokens, on a ``grid`` of ``(h, w)``) and ``extra`` ``(B,)``
    (the class and distillation token(s); ``None`` without)."""
    patches: torch.Tensor
    extra: Optional[torch.Tensor]
    grid: Tuple[int, int]


def cell_sources(image_hw: Tuple[int, int], cell: Tuple[int, int],
                 extra: bool, batch_size: int, device=None) -> torch.Tensor:
    """``(B, S, H, W)`` pixel weights with every ``cell`` of the image one
    source (row-major, as tokens are ordered), plus one source no pixel
    holds when ``extra`` (the class token's)."""
    H, W = image_hw
    gw = math.ceil(W / cell[1])
    ys = torch.arange(H, device=device) // cell[0]
    xs = torch.arange(W, device=device) // cell[1]
    S = math.ceil(H / cell[0]) * gw + int(extra)
    weights = F.one_hot(ys[:, None] * gw + xs, S).permute(2, 0, 1).float()
    return weights.contiguous()[None].expand(batch_size, -1, -1, -1)


@torch.no_grad()
def token_presence(backbone: nn.Module,
                   images: torch.Tensor) -> List[LayerPresence]:
    """Presence of every token entering every block (see the module doc)
    of ``images`` ``(B, 3, H, W)``, one :class:`LayerPresence` per block.
    ``backbone``: a described family whose patch embedding cuts
    non-overlapping patches of its description's ``token_size`` (ViT/DeiT,
    Swin), in the mode to analyse."""
    description = describe(backbone)  # a clear error for unsupported ones
    stride = description.token_size
    if stride is None:
        raise NotImplementedError(
            f'Token presence needs the token size of {type(backbone).__name__}'
            ', which its description does not state.')
    B, _, H, W = images.shape
    n_extra = description.extra_tokens
    n_input = math.ceil(H / stride[0]) * math.ceil(W / stride[1])
    # Tokens per block, read off one recorded forward.
    history = aligned_forward(backbone, images, images.new_ones(
        B, 1, H, W).float(), keep_history=True).history
    out = []
    for layer, n_tokens in enumerate(h.shape[1] for h in history[1:]):
        n_patches = n_tokens - n_extra
        # The block's grid: the patches, merged 2x2 some number of times.
        factor = 2**round(math.log(n_input / n_patches, 4))
        cell = (stride[0] * factor, stride[1] * factor)
        grid = (math.ceil(H / cell[0]), math.ceil(W / cell[1]))
        if grid[0] * grid[1] != n_patches:
            raise NotImplementedError(
                f'Block {layer} works on {n_patches} tokens, not a grid of '
                f'{cell[0]}x{cell[1]}-pixel cells of the {H}x{W} image: token '
                'presence needs non-overlapping patches of the token size '
                '(merged 2x2 by later stages).')
        pw = cell_sources((H, W), cell, n_extra > 0, B, images.device)
        S = pw.shape[1]
        area_share = None
        if n_extra:
            area_share = torch.zeros(B, S, device=images.device)
            area_share[:, -1] = 1
        aligned = aligned_forward(backbone, images, pw, area_share,
                                  dict(align_layers=[layer],
                                       residual_norm=False,
                                       follow_drop_path=False),
                                  keep_history=True)
        before, after = aligned.history[layer], aligned.history[layer + 1]
        if before.shape[1] == n_tokens:  # not across a patch merging
            # the extra tokens hold the last source, the patches the others
            sources = [n_patches] * n_extra + list(range(n_patches))
            one_hot = torch.eye(S, device=before.device)[sources]
            if not torch.allclose(before, one_hot.expand_as(before),
                                  atol=1e-5):
                raise NotImplementedError(
                    f'The labels entering block {layer} are not one source '
                    'per token: token presence needs non-overlapping patches '
                    'of the token size, each one cell of the image.')
        presence = after.sum(1)  # column sums of Ā: (B, S)
        out.append(LayerPresence(presence[:, :n_patches],
                                 presence[:, n_patches] if n_extra else None,
                                 grid))
    return out
