"""Random patch mixing (the TL-Align paper's ablation)."""
from typing import Tuple

import numpy as np
from mmpretrain.registry import BATCH_AUGMENTS

from .base import BaseCellMix


@BATCH_AUGMENTS.register_module()
class TLPatchMix(BaseCellMix):
    """Random patch mixing: swap randomly chosen cells of the patch grid.

    Sampling (one mask per batch, like the single CutMix box):

    1. ``lam = np.random.beta(alpha, alpha)`` and
       ``index = torch.randperm(N)``, as mmpretrain's :class:`Mixup`;
    2. ``k = round((1 - lam) * num_cells)`` (half rounds up) cells are chosen
       uniformly without replacement with
       ``np.random.choice(num_cells, k, replace=False)`` and taken from
       ``x[index]``, so the expected replaced share of cells is ``1 - lam``;
    3. ``lam`` becomes the exact share of pixels kept from the first source.

    With an image size that is not a multiple of ``patch_size`` the grid has
    ``ceil(H / p) x ceil(W / p)`` cells; the partial cells of the last row /
    column are drawn like any other cell but count by their pixel area in
    ``lam``.

    Args:
        alpha (float): Parameter of the Beta distribution, see :class:`Mixup`.
        patch_size (int): Side of a cell in pixels. Defaults to 16.
    """

    #: Name written to :attr:`MixRecord.mode`.
    record_mode = 'patchmix'

    def sample_cell_mask(self, grid_hw: Tuple[int, int],
                         lam: float) -> np.ndarray:
        """Choose ``round((1 - lam) * rows * cols)`` cells at random.

        Args:
            grid_hw (tuple): ``(rows, cols)`` of the cell grid.
            lam (float): The sampled mixing ratio.

        Returns:
            np.ndarray: ``(rows, cols)`` bool, True for replaced cells.
        """
        rows, cols = grid_hw
        num_cells = rows * cols
        num_replaced = int(np.floor((1. - lam) * num_cells + 0.5))
        num_replaced = min(max(num_replaced, 0), num_cells)
        mask = np.zeros(num_cells, dtype=bool)
        mask[np.random.choice(num_cells, num_replaced, replace=False)] = True
        return mask.reshape(rows, cols)
