"""Random patch mixing (the TL-Align paper's ablation)."""
from typing import Tuple

import numpy as np
from mmpretrain.registry import BATCH_AUGMENTS

from .base import BaseCellMix


@BATCH_AUGMENTS.register_module()
class TLPatchMix(BaseCellMix):
    """Random patch mixing: ``count`` cells of the patch grid, chosen
    uniformly without replacement (``np.random.choice(num_cells, count,
    replace=False)``), come from ``x[index]``; see :class:`BaseCellMix`.

    Args:
        alpha (float): Parameter of the Beta distribution, see :class:`Mixup`.
        patch_size (int): Side of a cell in pixels. Defaults to 16.
    """

    #: Name written to :attr:`MixRecord.mode`.
    record_mode = 'patchmix'

    def sample_cell_mask(self, grid_hw: Tuple[int, int],
                         count: int) -> np.ndarray:
        num_cells = grid_hw[0] * grid_hw[1]
        mask = np.zeros(num_cells, dtype=bool)
        mask[np.random.choice(num_cells, count, replace=False)] = True
        return mask.reshape(grid_hw)
