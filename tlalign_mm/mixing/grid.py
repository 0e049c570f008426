"""The patch (token) grid that the token-aligned mixes work on.

An ``H x W`` image is split into ``ceil(H / p) x ceil(W / p)`` cells of
``p x p`` pixels; when ``H`` or ``W`` is not a multiple of ``p`` the last row
/ column of cells is *partial*. This is the grid a ViT sees when its patch
embedding pads the image to a multiple of the patch (mmpretrain's
``PatchEmbed`` with adaptive padding), so a partial cell is still one token,
always taken from a single source.
"""
import math
from typing import Tuple

import numpy as np
import torch


def grid_shape(img_shape: Tuple[int, int], patch_size: int) -> Tuple[int, int]:
    """``(ceil(H / p), ceil(W / p))`` cells, partial ones counted."""
    img_h, img_w = int(img_shape[0]), int(img_shape[1])
    return math.ceil(img_h / patch_size), math.ceil(img_w / patch_size)


def cell_boundaries(size: int, patch_size: int) -> np.ndarray:
    """``[0, p, 2p, ..., size]`` along an axis of ``size`` pixels (``size``
    included: the end of a partial cell)."""
    size = int(size)
    return np.unique(np.append(np.arange(0, size, patch_size), size))


def snap_to_boundary(coord: int, size: int, patch_size: int) -> int:
    """The cell boundary nearest to pixel ``coord``, in ``[0, size]``; a tie
    goes to the lower one (``argmin`` returns the first minimum)."""
    bounds = cell_boundaries(size, patch_size)
    return int(bounds[np.argmin(np.abs(bounds - int(coord)))])


def cells_to_pixels(cell_mask: torch.Tensor, img_shape: Tuple[int, int],
                    patch_size: int) -> torch.Tensor:
    """A ``(..., rows, cols)`` cell mask as a ``(..., H, W)`` pixel mask,
    partial cells cropped at the image border."""
    img_h, img_w = int(img_shape[0]), int(img_shape[1])
    assert tuple(cell_mask.shape[-2:]) == grid_shape(img_shape, patch_size), \
        f'cell mask of shape {tuple(cell_mask.shape[-2:])} does not match ' \
        f'the {grid_shape(img_shape, patch_size)} grid of a {img_h}x{img_w} ' \
        f'image with patch_size={patch_size}.'
    pixels = cell_mask.repeat_interleave(patch_size, dim=-2)
    pixels = pixels.repeat_interleave(patch_size, dim=-1)
    return pixels[..., :img_h, :img_w]
