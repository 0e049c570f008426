"""The patch (token) grid that the token-aligned mixes work on.

An image of ``H x W`` pixels is split into ``ceil(H / p) x ceil(W / p)`` cells
of ``p x p`` pixels (``p = patch_size``). When ``H`` or ``W`` is not a multiple
of ``p`` the last row / column of cells is *partial*: it only covers the
remaining ``H % p`` rows (``W % p`` columns). This is the grid a ViT sees when
its patch embedding pads the image up to a multiple of the patch size (e.g.
mmpretrain's ``PatchEmbed`` with adaptive padding), so a partial cell is still
exactly one token and it is always taken from a single source.
"""
import math
from typing import Tuple

import numpy as np
import torch


def grid_shape(img_shape: Tuple[int, int], patch_size: int) -> Tuple[int, int]:
    """Number of cells ``(rows, cols)``, counting partial cells.

    Args:
        img_shape (tuple): ``(H, W)`` of the image in pixels.
        patch_size (int): Side of a cell in pixels.

    Returns:
        Tuple[int, int]: ``(ceil(H / patch_size), ceil(W / patch_size))``.
    """
    img_h, img_w = int(img_shape[0]), int(img_shape[1])
    return math.ceil(img_h / patch_size), math.ceil(img_w / patch_size)


def cell_boundaries(size: int, patch_size: int) -> np.ndarray:
    """Pixel coordinates of the cell boundaries along one axis.

    Args:
        size (int): Length of the axis in pixels.
        patch_size (int): Side of a cell in pixels.

    Returns:
        np.ndarray: ``[0, p, 2p, ..., size]`` (``size`` is included even when
        it is not a multiple of ``p``; it is then the end of a partial cell).
    """
    size = int(size)
    return np.unique(np.append(np.arange(0, size, patch_size), size))


def snap_to_boundary(coord: int, size: int, patch_size: int) -> int:
    """Move a pixel coordinate to the nearest cell boundary.

    The boundaries are those of :func:`cell_boundaries`, so the result always
    lies in ``[0, size]``. An exact tie between two boundaries goes to the
    lower one.

    Args:
        coord (int): Pixel coordinate along the axis.
        size (int): Length of the axis in pixels.
        patch_size (int): Side of a cell in pixels.

    Returns:
        int: The snapped coordinate.
    """
    bounds = cell_boundaries(size, patch_size)
    # ``argmin`` returns the first minimum: ties go to the lower boundary.
    return int(bounds[np.argmin(np.abs(bounds - int(coord)))])


def cells_to_pixels(cell_mask: torch.Tensor, img_shape: Tuple[int, int],
                    patch_size: int) -> torch.Tensor:
    """Expand a cell mask to a pixel mask.

    Args:
        cell_mask (Tensor): ``(..., rows, cols)`` mask on the cell grid, with
            ``(rows, cols) == grid_shape(img_shape, patch_size)``.
        img_shape (tuple): ``(H, W)`` of the image in pixels.
        patch_size (int): Side of a cell in pixels.

    Returns:
        Tensor: ``(..., H, W)`` mask, each cell's value repeated over its
        pixels (partial cells cropped at the image border).
    """
    img_h, img_w = int(img_shape[0]), int(img_shape[1])
    assert tuple(cell_mask.shape[-2:]) == grid_shape(img_shape, patch_size), \
        f'cell mask of shape {tuple(cell_mask.shape[-2:])} does not match ' \
        f'the {grid_shape(img_shape, patch_size)} grid of a {img_h}x{img_w} ' \
        f'image with patch_size={patch_size}.'
    pixels = cell_mask.repeat_interleave(patch_size, dim=-2)
    pixels = pixels.repeat_interleave(patch_size, dim=-1)
    return pixels[..., :img_h, :img_w]
