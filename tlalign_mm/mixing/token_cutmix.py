"""CutMix whose box follows the ViT patch (token) grid.

Two ways to draw the box (``box_units``):

- ``'tokens'``: the official TL-Align rule (Euphoria16/TL-Align, ``tla.py``
  at commit 2a3f35c: ``TL_AlignMix._mix_batch`` calls ``rand_token_bbox`` on
  the ``(H / p, W / p)`` token grid): timm's CutMix box in token units, side
  ``int(n * sqrt(1 - lam))`` tokens, a uniform centre token, corners
  ``centre -/+ side // 2`` clipped to the grid (a side of one token gives an
  empty box), then ``lam = 1 - box_tokens / all_tokens``. (``tla.py``'s
  ``tokenmix_mask_and_lam``, a random token *set*, is never called.)
- ``'pixels'`` (the default, for backward compatibility): mmpretrain's
  pixel CutMix box, each edge snapped to the nearest patch boundary.

Both give patches wholly from one source, and ``lam`` is the exact share of
pixels kept from the first source. The patch size is the model's:
``TLAlignClassifier`` fills it into the augment's config
(:func:`with_model_patch_size`) and refuses one that disagrees (a patch-4
model with 16-pixel cells would only ever swap 4x4 groups of its tokens).
"""
from typing import List, Optional, Tuple

import numpy as np
from mmpretrain.registry import BATCH_AUGMENTS

from .base import check_positive_int
from .cutmix import TLCutMix
from .grid import grid_shape, snap_to_boundary

BOX_UNITS = ('pixels', 'tokens')


def token_box(grid_hw: Tuple[int, int],
              lam: float) -> Tuple[int, int, int, int]:
    """The official box ``(y1, y2, x1, x2)`` in tokens on a ``(rows,
    cols)`` grid for the drawn ``lam`` (``rand_token_bbox`` of ``tla.py``,
    margin 0, one box; the centre draws ``np.random.randint(0, rows)`` then
    ``(0, cols)``); empty when a side is under 2 tokens."""
    rows, cols = int(grid_hw[0]), int(grid_hw[1])
    ratio = np.sqrt(1 - lam)
    cut_h, cut_w = int(rows * ratio), int(cols * ratio)
    cy = np.random.randint(0, rows)
    cx = np.random.randint(0, cols)
    y1 = int(np.clip(cy - cut_h // 2, 0, rows))
    y2 = int(np.clip(cy + cut_h // 2, 0, rows))
    x1 = int(np.clip(cx - cut_w // 2, 0, cols))
    x2 = int(np.clip(cx + cut_w // 2, 0, cols))
    return y1, y2, x1, x2


def with_model_patch_size(cfg: dict, size: Optional[Tuple[int, int]],
                          name: str) -> dict:
    """A :class:`TLTokenCutMix` config ``cfg`` with the ``(ph, pw)`` patch
    ``size`` of model ``name`` (``models.families.patch_size``; ``None``:
    unknown): filled in where ``cfg`` has none, a ValueError where it
    differs or cannot be found."""
    given = cfg.get('patch_size')
    if size is None:
        if given is None:
            raise ValueError(
                f'TLTokenCutMix cannot find the patch size of {name} (no '
                'patch embedding with a `projection` convolution or a '
                '`patch_size`): give it `patch_size` in the config.')
        return cfg
    if size[0] != size[1]:
        raise ValueError(
            f'TLTokenCutMix needs square patches; {name} has {size}.')
    if given is not None and given != size[0]:
        raise ValueError(
            f'TLTokenCutMix(patch_size={given}) does not match the '
            f'{size[0]}x{size[0]} patches of {name}: its boxes would not '
            'follow the token grid. Remove `patch_size` from the augment (it '
            f"then takes the model's) or set it to {size[0]}.")
    return dict(cfg, patch_size=size[0])


@BATCH_AUGMENTS.register_module()
class TLTokenCutMix(TLCutMix):
    """Token-aligned CutMix: every patch comes wholly from one source.

    The draws are those of mmpretrain's :class:`CutMix` (``lam``, ``index``,
    then the box); the box is drawn on the ``ceil(H / p) x ceil(W / p)``
    token grid (``'tokens'``, :func:`token_box`; a side under two tokens
    mixes nothing) or is mmpretrain's pixel box with each edge moved to the
    nearest cell boundary (``'pixels'``; a tie goes to the lower one; a box
    thinner than half a patch may vanish). A partial last row / column is
    one token (:mod:`.grid`); ``lam = 1 - box_pixels / (H * W)`` (with
    ``'tokens'`` and whole cells, the official ``1 - box_tokens /
    all_tokens``).

    Args:
        alpha (float): Parameter of the Beta distribution of ``lam``, > 0.
        cutmix_minmax (List[float], optional): Min/max box side ratio, see
            :class:`CutMix` (``'pixels'`` only). Defaults to None.
        patch_size (int, optional): Side of a patch in pixels. Defaults to
            None: ``TLAlignClassifier`` builds the augment with the model's.
            A value that differs from the model's is an error.
        box_units (str): ``'pixels'`` (default) or ``'tokens'``.
    """

    #: Name written to :attr:`MixRecord.mode`.
    record_mode = 'tokencutmix'

    def __init__(self,
                 alpha: float,
                 cutmix_minmax: Optional[List[float]] = None,
                 patch_size: Optional[int] = None,
                 box_units: str = 'pixels'):
        owner = type(self).__name__
        if patch_size is not None:
            check_positive_int(patch_size, 'patch_size', owner,
                               "pixels, or None for the model's")
        if box_units not in BOX_UNITS:
            raise ValueError(
                f'{owner}: box_units must be one of {BOX_UNITS}, got '
                f'{box_units!r}.')
        if cutmix_minmax is not None and box_units == 'tokens':
            raise ValueError(
                f"{owner}: cutmix_minmax is not part of the official token "
                "rule; use box_units='pixels' with it.")
        # alpha and cutmix_minmax are checked by TLCutMix.
        super().__init__(
            alpha=alpha, cutmix_minmax=cutmix_minmax, correct_lam=True)
        self.patch_size = patch_size
        self.box_units = box_units

    def cutmix_bbox_and_lam(self, img_shape: Tuple[int, int], lam: float,
                            count: Optional[int] = None) -> tuple:
        """``((y1, y2, x1, x2), lam)``: the box in pixels on the patch grid
        and the kept pixel share (``count``: one box per batch only)."""
        if count is not None:
            raise ValueError('TLTokenCutMix draws one box per batch.')
        if self.patch_size is None:
            raise ValueError(
                'TLTokenCutMix(patch_size=None) takes the patch size of the '
                'model, which TLAlignClassifier builds it with; '
                'outside it, give `patch_size`.')
        img_h, img_w = int(img_shape[0]), int(img_shape[1])
        p = self.patch_size
        if self.box_units == 'tokens':
            y1, y2, x1, x2 = token_box(grid_shape((img_h, img_w), p), lam)
            y1, y2 = min(y1 * p, img_h), min(y2 * p, img_h)
            x1, x2 = min(x1 * p, img_w), min(x2 * p, img_w)
        else:
            (y1, y2, x1, x2), _ = super().cutmix_bbox_and_lam(img_shape, lam)
            y1, y2 = (snap_to_boundary(v, img_h, p) for v in (y1, y2))
            x1, x2 = (snap_to_boundary(v, img_w, p) for v in (x1, x2))
        lam = 1. - (y2 - y1) * (x2 - x1) / float(img_h * img_w)
        return (y1, y2, x1, x2), lam

    def __repr__(self) -> str:
        return f'{type(self).__name__}(alpha={self.alpha}, ' \
               f'cutmix_minmax={self.cutmix_minmax}, ' \
               f'patch_size={self.patch_size}, ' \
               f'box_units={self.box_units!r})'
