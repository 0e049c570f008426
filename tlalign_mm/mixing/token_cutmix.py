"""CutMix whose box follows the ViT patch (token) grid.

Two ways to draw the box (``box_units``):

- ``'tokens'``: the official TL-Align rule (Euphoria16/TL-Align, ``tla.py``
  at commit 2a3f35c: ``TL_AlignMix._mix_batch`` calls ``rand_token_bbox`` on
  the ``(H / p, W / p)`` token grid). timm's CutMix box is drawn directly in
  token units: side ``int(n * sqrt(1 - lam))`` tokens, a centre token drawn
  uniformly, corners ``centre -/+ side // 2`` clipped to the grid (so a
  side of one token, ``lam > 1 - (2 / n) ** 2``, gives an empty box and
  nothing is mixed), then ``lam = 1 - box_tokens / all_tokens``. (``tla.py``
  also defines ``tokenmix_mask_and_lam``, a random token *set*, which its
  training code never calls.)
- ``'pixels'`` (the default, kept for backward compatibility): mmpretrain's
  pixel CutMix box, each edge snapped to the nearest patch boundary.

Both give patches wholly from one source, and ``lam`` is the exact share of
pixels kept from the first source.

The patch size is the model's: ``TLAlignClassifier`` builds its data
preprocessor with the backbone's patch size, which fills it into the
augment's config (:func:`with_model_patch_size`), or raises when one given
in the config disagrees (a patch-4 model with 16-pixel
cells would only ever swap whole 4x4 groups of its tokens).
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
    """The official TL-Align box on the token grid (``rand_token_bbox`` of
    Euphoria16/TL-Align ``tla.py``, margin 0, one box).

    Draws ``np.random.randint(0, rows)`` then ``np.random.randint(0, cols)``
    for the centre.

    Args:
        grid_hw (tuple): ``(rows, cols)`` of the token grid.
        lam (float): the sampled ``lam``; the box covers about ``1 - lam`` of
            the tokens.

    Returns:
        tuple: ``(y1, y2, x1, x2)`` in tokens, ``0 <= y1 <= y2 <= rows``;
        empty (``y1 == y2`` or ``x1 == x2``) when a side is under 2 tokens
        or the clipping leaves nothing.
    """
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
    """A :class:`TLTokenCutMix` config with the model's patch size: filled
    in where the config has none, checked where it has one.

    Args:
        cfg (dict): the augment's config.
        size (tuple, optional): ``(ph, pw)`` of the model's patch embedding
            (its recorder's ``patch_size``), ``None`` when unknown.
        name (str): the model's name, for messages.

    Raises:
        ValueError: when a configured ``patch_size`` differs from the
            model's, or the model's is unknown or not square and the config
            has none.
    """
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

    The draws are those of mmpretrain's :class:`CutMix`:
    ``lam = np.random.beta(alpha, alpha)``, ``index = torch.randperm(N)``,
    then the box. The box depends on ``box_units``:

    - ``'tokens'`` (TL-Align's official rule, :func:`token_box`): drawn on
      the ``ceil(H / p) x ceil(W / p)`` token grid with timm's CutMix
      formula, so its side is a whole number of tokens; a side under two
      tokens gives an empty box (nothing mixed, ``lam == 1``).
    - ``'pixels'`` (default): mmpretrain's pixel box, each edge moved to the
      *nearest* cell boundary (``0, p, 2p, ...`` and the image border; a tie
      goes to the lower boundary); a box thinner than half a patch may
      collapse to nothing.

    When the image size is not a multiple of ``patch_size`` the last row /
    column of cells is partial (one token; see :mod:`tlalign_mm.mixing.grid`).
    ``lam`` is then ``1 - box_pixels / (H * W)``, the exact share of pixels
    kept from the first source (with ``'tokens'`` and whole cells, exactly
    the official ``1 - box_tokens / all_tokens``).

    Args:
        alpha (float): Parameter of the Beta distribution of ``lam``, > 0.
        cutmix_minmax (List[float], optional): Min/max box side ratio, see
            :class:`CutMix` (``'pixels'`` only). Defaults to None.
        patch_size (int, optional): Side of a patch in pixels. Defaults to
            None: ``TLAlignClassifier`` builds the augment with the model's.
            A value that differs from the model's is an error.
        box_units (str): ``'pixels'`` or ``'tokens'``, see above. Defaults to
            ``'pixels'``.
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

    def cutmix_bbox_and_lam(self,
                            img_shape: Tuple[int, int],
                            lam: float,
                            count: Optional[int] = None) -> tuple:
        """Draw the box on the patch grid and set ``lam`` to the kept pixel
        share.

        Args:
            img_shape (tuple): ``(H, W)``.
            lam (float): Sampled CutMix lambda.
            count (int, optional): Must be None (one box per batch).

        Returns:
            tuple: ``((y1, y2, x1, x2), lam)``, the box in pixels.
        """
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
            y1 = snap_to_boundary(y1, img_h, p)
            y2 = snap_to_boundary(y2, img_h, p)
            x1 = snap_to_boundary(x1, img_w, p)
            x2 = snap_to_boundary(x2, img_w, p)
        lam = 1. - (y2 - y1) * (x2 - x1) / float(img_h * img_w)
        return (y1, y2, x1, x2), lam

    def __repr__(self) -> str:
        return f'{type(self).__name__}(alpha={self.alpha}, ' \
               f'cutmix_minmax={self.cutmix_minmax}, ' \
               f'patch_size={self.patch_size}, ' \
               f'box_units={self.box_units!r})'
