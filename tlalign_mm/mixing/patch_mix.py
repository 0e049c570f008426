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
                         count: int) -> np.ndarray:
        """Choose ``count`` of the ``rows * cols`` cells at random."""
        num_cells = grid_hw[0] * grid_hw[1]
        mask = np.zeros(num_cells, dtype=bool)
        mask[np.random.choice(num_cells, count, replace=False)] = True
        return mask.reshape(grid_hw)
