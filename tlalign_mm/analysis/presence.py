"""Token presence, layer by layer (TL-Align, Eq. 2).

The contribution of token ``z_i`` entering a block to token ``ẑ_j`` leaving
its attention is the head-averaged attention ``c(z_i, ẑ_j) = Ā_ji``; the
presence of ``z_i`` is its total contribution, the column sum
``p(z_i) = sum_j Ā_ji``. Attention rows sum to 1, so presences sum to the
number of tokens ``N`` and average 1; their spread is the token
fluctuation.

How ``Ā`` is obtained, exactly and without re-implementing attention: the
alignment rule, with every token of the block's input as its own
source. For block ``l`` the image is cut into the cells of that block's
token grid (the patches; for Swin, the cells its patch merging has made),
each cell one source, and the class (and distillation) token(s) one more
source. Aligning with block ``l`` only and no residual average
(``align_layers=[l]``, ``residual_norm=False``) gives labels
``Ā_l Y = Ā_l`` after block ``l``, whose column sums are the presences. One
forward per block, with ``N_l + 1`` label channels.

For a distilled DeiT the class and distillation tokens share their source:
their presences are reported together, as one "extra tokens" entry.
"""
import math
from typing import List, NamedTuple, Optional, Tuple

import torch
import torch.nn as nn

from tlalign_mm.models.aligned_forward import aligned_forward
from tlalign_mm.models.families import describe


class LayerPresence(NamedTuple):
    """Presence of the tokens entering one block.

    Attributes:
        patches (Tensor): ``(B, N_l)`` presence of each spatial token.
        extra (Tensor or None): ``(B,)`` presence of the class (and
            distillation) token(s); ``None`` without.
        grid (tuple): ``(h, w)`` of the spatial tokens.
    """
    patches: torch.Tensor
    extra: Optional[torch.Tensor]
    grid: Tuple[int, int]


def _patch_stride(embed: nn.Module) -> Tuple[int, int]:
    conv = getattr(embed, 'projection', None) or getattr(embed, 'proj', None)
    if not isinstance(conv, nn.Conv2d):
        raise NotImplementedError(
            'Token presence needs a patch embedding that is a convolution; '
            f'{type(embed).__name__} is not.')
    if tuple(conv.kernel_size) != tuple(conv.stride) or any(
            p != 0 for p in (conv.padding if isinstance(conv.padding, tuple)
                             else (conv.padding, ))):
        raise NotImplementedError(
            'Token presence needs a patch embedding of non-overlapping, '
            'unpadded patches (kernel == stride).')
    return tuple(conv.stride)


def cell_sources(image_hw: Tuple[int, int], cell: Tuple[int, int],
                 extra: bool, batch_size: int, device=None) -> torch.Tensor:
    """``(B, S, H, W)`` pixel weights with every ``cell`` of the image one
    source (row-major, as tokens are ordered), plus one source no pixel
    holds when ``extra`` (the class token's)."""
    H, W = image_hw
    gh, gw = math.ceil(H / cell[0]), math.ceil(W / cell[1])
    ys = torch.arange(H, device=device) // cell[0]
    xs = torch.arange(W, device=device) // cell[1]
    index = (ys[:, None] * gw + xs[None, :]).reshape(-1)
    S = gh * gw + int(extra)
    weights = torch.zeros(S, H * W, device=device)
    weights[index, torch.arange(H * W, device=device)] = 1
    return weights.reshape(1, S, H, W).expand(batch_size, -1, -1, -1)


def block_grids(backbone: nn.Module, images: torch.Tensor) -> List[int]:
    """Number of spatial tokens each block works on, read off one recorded
    forward (the labels after block ``l`` hold one row per token)."""
    B = images.shape[0]
    pw = images.new_ones(B, 1, *images.shape[-2:]).float()
    aligned = aligned_forward(backbone, images, pw, keep_history=True)
    return [h.shape[1] for h in aligned.history[1:]]


def source_of_tokens(n_extra: int, n_patches: int) -> List[int]:
    """Source of each token, in token order: the extra tokens hold the last
    source, the patches the first ``n_patches``."""
    return [n_patches] * n_extra + list(range(n_patches))


@torch.no_grad()
def token_presence(backbone: nn.Module,
                   images: torch.Tensor) -> List[LayerPresence]:
    """Presence of every token entering every block, see the module doc.

    Args:
        backbone (nn.Module): a backbone of a described family whose patch
            embedding cuts non-overlapping patches (ViT/DeiT, Swin), in the
            mode (eval) to analyse.
        images (Tensor): ``(B, 3, H, W)``.

    Returns:
        list[LayerPresence]: one per block.
    """
    description = describe(backbone)  # a clear error for unsupported ones
    stride = _patch_stride(description.embed)
    B, _, H, W = images.shape
    n_extra = description.extra_tokens
    n_input = math.ceil(H / stride[0]) * math.ceil(W / stride[1])
    out = []
    for layer, n_tokens in enumerate(block_grids(backbone, images)):
        n_patches = n_tokens - n_extra
        # The block's grid: the patches, merged 2x2 some number of times.
        factor = 2**round(math.log(n_input / n_patches, 4))
        cell = (stride[0] * factor, stride[1] * factor)
        grid = (math.ceil(H / cell[0]), math.ceil(W / cell[1]))
        if grid[0] * grid[1] != n_patches:
            raise NotImplementedError(
                f'Block {layer} works on {n_patches} tokens, not a grid of '
                f'{cell[0]}x{cell[1]}-pixel cells of the {H}x{W} image.')
        pw = cell_sources((H, W), cell, n_extra > 0, B, images.device)
        S = pw.shape[1]
        area_share = None
        if n_extra:
            area_share = torch.zeros(B, S, device=images.device)
            area_share[:, -1] = 1
        aligned = aligned_forward(backbone, images, pw, area_share,
                                  align_layers=[layer], residual_norm=False,
                                  follow_drop_path=False, keep_history=True)
        before, after = aligned.history[layer], aligned.history[layer + 1]
        if before.shape[1] == n_tokens:  # not across a patch merging
            one_hot = torch.eye(S, device=before.device)[source_of_tokens(
                n_extra, n_patches)]
            if not torch.allclose(before, one_hot.expand_as(before),
                                  atol=1e-5):
                raise RuntimeError(
                    f'The labels entering block {layer} are not one source '
                    'per token; presence would be wrong for this backbone.')
        presence = after.sum(1)  # column sums of Ā: (B, S)
        out.append(LayerPresence(presence[:, :n_patches],
                                 presence[:, n_patches] if n_extra else None,
                                 grid))
    return out
