"""Block-wise mixing (the TL-Align paper's ablation)."""
import math
from typing import Optional, Tuple

import numpy as np
from mmpretrain.registry import BATCH_AUGMENTS

from .base import BaseCellMix, check_positive_int, is_real


@BATCH_AUGMENTS.register_module()
class TLBlockMix(BaseCellMix):
    """Block-wise mixing: swap random rectangles of cells, BEiT style.

    The cell mask is drawn like mmpretrain's ``BEiTMaskGenerator`` on the
    patch grid (numpy RNG, one mask per batch; see :class:`BaseCellMix`),
    for ``target = round((1 - lam) * num_cells)`` cells: until ``target``
    are replaced, with ``remaining = target - replaced`` (capped by
    ``max_num_patches``), up to ``max_attempts`` tries place one block: area
    ``U(min_num_patches, max(min_num_patches, remaining))``, aspect ratio
    log-uniform in ``[min_aspect, max_aspect]``, ``h = round(sqrt(area *
    aspect))``, ``w = round(sqrt(area / aspect))``; it must fit the grid and
    hold ``min_num_patches`` cells; its top-left corner is uniform; it is
    accepted when it replaces 1 to ``remaining`` new cells (blocks may
    overlap). It stops when no block is accepted, so the replaced cells
    never exceed ``target`` and may fall short of it (typically by less than
    ``min_num_patches``).

    Args:
        alpha (float): Parameter of the Beta distribution, see :class:`Mixup`.
        patch_size (int): Side of a cell in pixels. Defaults to 16.
        min_num_patches (int): Minimum number of cells of a block. Defaults
            to 4 (as mmpretrain's ``BEiTMaskGenerator``).
        max_num_patches (int, optional): Maximum number of new cells one block
            may replace. Defaults to None (no limit beyond the target).
        min_aspect (float): Minimum aspect ratio (h / w) of a block. Defaults
            to 0.3.
        max_aspect (float, optional): Maximum aspect ratio. Defaults to None,
            meaning ``1 / min_aspect``.
        max_attempts (int): Tries to place one block. Defaults to 10.
    """

    #: Name written to :attr:`MixRecord.mode`.
    record_mode = 'blockmix'

    def __init__(self,
                 alpha: float,
                 patch_size: int = 16,
                 min_num_patches: int = 4,
                 max_num_patches: Optional[int] = None,
                 min_aspect: float = 0.3,
                 max_aspect: Optional[float] = None,
                 max_attempts: int = 10):
        super().__init__(alpha=alpha, patch_size=patch_size)
        owner = type(self).__name__
        check_positive_int(min_num_patches, 'min_num_patches', owner,
                           'the fewest cells of a block')
        if max_num_patches is not None and (check_positive_int(
                max_num_patches, 'max_num_patches', owner,
                'the most new cells one block may replace')
                                            < min_num_patches):
            raise ValueError(f'{owner}: max_num_patches ({max_num_patches}) '
                             'must be >= min_num_patches '
                             f'({min_num_patches})')
        for name, value in (('min_aspect', min_aspect),
                            ('max_aspect', max_aspect)):
            if value is not None and not (is_real(value) and value > 0):
                raise ValueError(f'{owner}: {name} must be a positive number '
                                 f'(a block\'s height / width); got {value!r}')
        if max_aspect is not None and max_aspect < min_aspect:
            raise ValueError(f'{owner}: max_aspect ({max_aspect}) must be >= '
                             f'min_aspect ({min_aspect})')
        check_positive_int(max_attempts, 'max_attempts', owner,
                           'tries to place one block')
        self.min_num_patches = min_num_patches
        self.max_num_patches = max_num_patches
        max_aspect = max_aspect or 1 / min_aspect
        self.log_aspect_ratio = (math.log(min_aspect), math.log(max_aspect))
        self.max_attempts = max_attempts

    def _place_block(self, mask: np.ndarray, max_patches: int) -> int:
        """Add one block of at most ``max_patches`` new cells to ``mask``
        in place; the number of new cells (0: none was placed)."""
        rows, cols = mask.shape
        for _ in range(self.max_attempts):
            target_area = np.random.uniform(
                self.min_num_patches, max(self.min_num_patches, max_patches))
            aspect_ratio = math.exp(np.random.uniform(*self.log_aspect_ratio))
            h = int(round(math.sqrt(target_area * aspect_ratio)))
            w = int(round(math.sqrt(target_area / aspect_ratio)))
            if not (1 <= h <= rows and 1 <= w <= cols
                    and h * w >= self.min_num_patches):
                continue
            top = np.random.randint(0, rows - h + 1)
            left = np.random.randint(0, cols - w + 1)
            num_new = h * w - int(mask[top:top + h, left:left + w].sum())
            if 0 < num_new <= max_patches:
                mask[top:top + h, left:left + w] = True
                return num_new
        return 0

    def sample_cell_mask(self, grid_hw: Tuple[int, int],
                         count: int) -> np.ndarray:
        mask = np.zeros(grid_hw, dtype=bool)
        replaced = 0
        while replaced < count:
            max_patches = count - replaced
            if self.max_num_patches is not None:
                max_patches = min(max_patches, self.max_num_patches)
            delta = self._place_block(mask, max_patches)
            if delta == 0:
                break
            replaced += delta
        return mask

    def __repr__(self) -> str:
        return f'{type(self).__name__}(alpha={self.alpha}, ' \
               f'patch_size={self.patch_size}, ' \
               f'min_num_patches={self.min_num_patches}, ' \
               f'max_num_patches={self.max_num_patches}, ' \
               f'log_aspect_ratio={self.log_aspect_ratio}, ' \
               f'max_attempts={self.max_attempts})'
