"""CutMix whose box follows the ViT patch grid."""
from typing import List, Optional, Tuple

from mmpretrain.registry import BATCH_AUGMENTS

from .cutmix import TLCutMix
from .grid import snap_to_boundary


@BATCH_AUGMENTS.register_module()
class TLTokenCutMix(TLCutMix):
    """Token-aligned CutMix: the CutMix box snapped to the patch grid.

    The box is sampled exactly like mmpretrain's :class:`CutMix`
    (``np.random.beta``, ``torch.randperm``, ``np.random.randint`` ...; the
    ``lam`` correction is always on), then snapped:

    - each of the four box edges moves to the *nearest* cell boundary
      (``0, p, 2p, ...`` and the image border; an exact tie goes to the lower
      boundary), so the box is clipped to the image and never cuts a patch;
    - a box thinner than half a patch may collapse to nothing (then nothing is
      mixed and ``lam == 1``);
    - when the image size is not a multiple of ``patch_size`` the last,
      partial row / column of cells is one cell: its edges are the last
      multiple of ``p`` and the image border
      (see :mod:`tlalign_mm.mixing.grid`);
    - ``lam`` is recomputed as ``1 - snapped_box_area / (H * W)``, the exact
      share of pixels kept from the first source.

    Every patch is then wholly from one source: the pixel weights averaged over
    a ``patch_size x patch_size`` cell are 0 or 1.

    Args:
        alpha (float): Parameter of the Beta distribution, see :class:`CutMix`.
        cutmix_minmax (List[float], optional): Min/max box side ratio, see
            :class:`CutMix`. Defaults to None.
        patch_size (int): Side of a ViT patch in pixels. Defaults to 16.
    """

    #: Name written to :attr:`MixRecord.mode`.
    record_mode = 'tokencutmix'

    def __init__(self,
                 alpha: float,
                 cutmix_minmax: Optional[List[float]] = None,
                 patch_size: int = 16):
        super().__init__(
            alpha=alpha, cutmix_minmax=cutmix_minmax, correct_lam=True)
        assert isinstance(patch_size, int) and patch_size > 0, \
            f'`patch_size` should be a positive int, got {patch_size!r}.'
        self.patch_size = patch_size

    def cutmix_bbox_and_lam(self,
                            img_shape: Tuple[int, int],
                            lam: float,
                            count: Optional[int] = None) -> tuple:
        """Sample the CutMix box, snap it to the patch grid and set ``lam`` to
        the kept area share.

        Args:
            img_shape (tuple): ``(H, W)``.
            lam (float): Sampled CutMix lambda.
            count (int, optional): Must be None (one box per batch).

        Returns:
            tuple: ``((y1, y2, x1, x2), lam)`` with the snapped box.
        """
        assert count is None, 'TLTokenCutMix draws one box per batch.'
        (y1, y2, x1, x2), _ = super().cutmix_bbox_and_lam(img_shape, lam)
        img_h, img_w = int(img_shape[0]), int(img_shape[1])
        y1 = snap_to_boundary(y1, img_h, self.patch_size)
        y2 = snap_to_boundary(y2, img_h, self.patch_size)
        x1 = snap_to_boundary(x1, img_w, self.patch_size)
        x2 = snap_to_boundary(x2, img_w, self.patch_size)
        lam = 1. - (y2 - y1) * (x2 - x1) / float(img_h * img_w)
        return (y1, y2, x1, x2), lam

    def __repr__(self) -> str:
        return f'{type(self).__name__}(alpha={self.alpha}, ' \
               f'cutmix_minmax={self.cutmix_minmax}, ' \
               f'patch_size={self.patch_size})'
