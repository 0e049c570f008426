"""Shifted Patch Tokenization (SPT), Lee et al. 2021, "Vision Transformer for
Small-Size Datasets", as an mmpretrain component.

The input is shifted by half a patch in the four diagonal directions (zero
padding), the copies are concatenated with it along channels (``5C``),
split into patches, flattened, layer-normalised and linearly projected. One
module serves as a ViT's patch embedding (mmcv ``PatchEmbed``'s interface:
``forward(x) -> (tokens, (h, w))``, ``init_out_size``) and as the pooling
between hierarchical stages (``PatchMerging``'s: ``forward(x, input_size)``,
``out_channels``); :func:`spt_token_labels` gives its tokens' labels.
"""
from typing import Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks.transformer import AdaptivePadding
from mmengine.model import BaseModule
from mmpretrain.registry import MODELS

from tlalign_mm.core import flatten_label_map
from tlalign_mm.registry import TOKEN_RULES

_Pair = Tuple[int, int]

# Row/column signs of the four diagonal views, in the authors' order
# (``x_lu, x_ru, x_lb, x_rb`` of their ``PatchShifting``): view ``(sy, sx)``
# holds ``x[i + sy * shift_h, j + sx * shift_w]`` at ``(i, j)``, zero where
# that falls outside the input.
DIAGONAL_SHIFTS = ((-1, -1), (-1, 1), (1, -1), (1, 1))


def _pair(x) -> _Pair:
    return (int(x[0]), int(x[1])) if isinstance(x, (tuple, list)) \
        else (int(x), int(x))


def shift_concat(x: torch.Tensor, shift: _Pair) -> torch.Tensor:
    """``(B, C, H, W)`` -> ``(B, 5C, H, W)``: the input and its four
    diagonally shifted copies (zero-filled), concatenated along channels in
    the order ``[x, *DIAGONAL_SHIFTS]``."""
    sh, sw = shift
    H, W = x.shape[-2:]
    padded = F.pad(x, (sw, sw, sh, sh))
    views = [x]
    for sy, sx in DIAGONAL_SHIFTS:
        top, left = sh + sy * sh, sw + sx * sw
        views.append(padded[..., top:top + H, left:left + W])
    return torch.cat(views, dim=1)


#: ``label_views`` of :class:`ShiftedPatchTokenization`.
LABEL_VIEWS = ('all', 'centre')


@MODELS.register_module()
class ShiftedPatchTokenization(BaseModule):
    """Shifted Patch Tokenization.

    Args:
        in_channels (int): channels of the input (image or tokens).
        embed_dims (int, optional): output channels (the ``PatchEmbed``
            name). Give this or ``out_channels``.
        out_channels (int, optional): output channels (the ``PatchMerging``
            name).
        patch_size (int | tuple): patch (and stride) size. Defaults to 2.
        shift_size (int | tuple, optional): the diagonal shift; defaults to
            half a patch, ``patch_size // 2`` (the paper's).
        padding (str): ``'corner'`` (default, bottom/right) or ``'same'``:
            mmcv's adaptive zero padding of a map that is not a multiple of
            the patch, applied after shifting, as ``PatchEmbed`` and
            ``PatchMerging`` do by default.
        input_size (int | tuple, optional): the expected input size, to give
            ``init_out_size`` (a ViT sizes its position embedding with it).
        norm_cfg (dict, optional): the norm over each flattened patch
            (``5C * patch_h * patch_w`` features). Defaults to LayerNorm.
        bias (bool): bias of the linear projection. Defaults to True.
        label_views (str): which views give a token its TL-Align label
            (:func:`spt_token_labels`): ``'all'`` (default) or
            ``'centre'``, its own patch as for a plain patch embedding (an
            ablation; the features still read all five).
        init_cfg (dict, optional): initialisation config.

    The flattened patch is ordered ``(patch row, patch column, channel)``
    with channel ``v * C + c`` for view ``v`` of ``[x, *DIAGONAL_SHIFTS]``,
    the authors' ``Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)')``.
    """

    def __init__(self, in_channels: int = 3,
                 embed_dims: Optional[int] = None,
                 out_channels: Optional[int] = None,
                 patch_size: Union[int, Sequence[int]] = 2,
                 shift_size: Union[int, Sequence[int], None] = None,
                 padding: str = 'corner',
                 input_size: Union[int, Sequence[int], None] = None,
                 norm_cfg: Optional[dict] = dict(type='LN'), bias: bool = True,
                 label_views: str = 'all', init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        if label_views not in LABEL_VIEWS:
            raise ValueError(f'label_views must be one of {LABEL_VIEWS}, '
                             f'got {label_views!r}.')
        self.label_views = label_views
        if embed_dims is None and out_channels is None:
            raise ValueError('Give embed_dims (or out_channels).')
        if embed_dims is not None and out_channels is not None \
                and embed_dims != out_channels:
            raise ValueError(f'embed_dims={embed_dims} and out_channels='
                             f'{out_channels} disagree; give one of them.')
        out = embed_dims if embed_dims is not None else out_channels
        self.in_channels = in_channels
        self.embed_dims = self.out_channels = out
        self.patch_size = _pair(patch_size)
        self.shift_size = _pair(
            shift_size if shift_size is not None else
            (self.patch_size[0] // 2, self.patch_size[1] // 2))
        if any(s < 0 for s in self.shift_size):
            raise ValueError(f'shift_size must be >= 0, got {shift_size}.')
        self.num_views = 1 + len(DIAGONAL_SHIFTS)
        self.adaptive_padding = None if padding is None else AdaptivePadding(
            kernel_size=self.patch_size, stride=self.patch_size,
            padding=padding)
        patch_dim = self.num_views * in_channels * self.patch_size[0] * \
            self.patch_size[1]
        self.patch_dim = patch_dim
        self.norm = build_norm_layer(norm_cfg, patch_dim)[1] \
            if norm_cfg is not None else None
        self.reduction = nn.Linear(patch_dim, out, bias=bias)

        self.init_input_size = None if input_size is None else \
            _pair(input_size)
        self.init_out_size = None if input_size is None else \
            self.output_size(self.init_input_size)

    def output_size(self, input_size) -> _Pair:
        """``(h, w)`` of the token grid for an ``(H, W)`` input."""
        H, W = _pair(input_size)
        ph, pw = self.patch_size
        if self.adaptive_padding is not None:
            pad_h, pad_w = self.adaptive_padding.get_pad_shape((H, W))
            H, W = H + pad_h, W + pad_w
        return H // ph, W // pw

    def shift_concat(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W)`` -> ``(B, 5C, H, W)``, see :func:`shift_concat`."""
        return shift_concat(x, self.shift_size)

    def forward(self, x: torch.Tensor, input_size=None):
        """Tokenize an image ``(B, C, H, W)``, or pool a token map
        ``(B, H*W, C)`` of spatial size ``input_size = (H, W)``.

        Returns:
            tuple: tokens ``(B, h*w, out_channels)`` and ``(h, w)``.
        """
        if x.dim() == 3:
            if input_size is None:
                raise ValueError('A token map (B, L, C) needs its input_size '
                                 '(H, W).')
            B, L, C = x.shape
            H, W = input_size
            if L != H * W:
                raise ValueError(f'{L} tokens do not form a {H}x{W} map.')
            x = x.reshape(B, H, W, C).permute(0, 3, 1, 2)
        elif x.dim() != 4:
            raise ValueError('ShiftedPatchTokenization takes (B, C, H, W) '
                             f'images or (B, L, C) tokens, got {x.dim()}-D.')
        x = self.shift_concat(x)
        if self.adaptive_padding is not None:
            x = self.adaptive_padding(x)
        B, C5, H, W = x.shape
        ph, pw = self.patch_size
        h, w = H // ph, W // pw
        x = x[..., :h * ph, :w * pw]
        x = x.reshape(B, C5, h, ph, w, pw).permute(0, 2, 4, 3, 5, 1)
        x = x.reshape(B, h * w, ph * pw * C5)
        if self.norm is not None:
            x = self.norm(x)
        return self.reduction(x), (h, w)


@TOKEN_RULES.register_module(
    'tlalign_mm.models.spt_lsa.spt.ShiftedPatchTokenization')
def spt_token_labels(spt: ShiftedPatchTokenization,
                     label_map: torch.Tensor) -> torch.Tensor:
    """``(B, S, H, W)`` source weights of ``spt``'s input (pixels or
    tokens) -> ``(B, h*w, S)`` labels of its tokens: the mean label over the
    real positions its five views read (a position read by two views counts
    twice; zero padding, from the shift or the adaptive padding, carries no
    mass); with ``label_views='centre'``, of its own patch alone."""
    B, S, H, W = label_map.shape
    if spt.label_views == 'centre':
        mass, count = label_map, label_map.new_ones(1, 1, H, W)
    else:
        V = spt.num_views
        mass = spt.shift_concat(label_map).reshape(B, V, S, H, W).sum(1)
        count = spt.shift_concat(label_map.new_ones(1, 1, H, W)).sum(
            1, keepdim=True)
    if spt.adaptive_padding is not None:
        mass = spt.adaptive_padding(mass)
        count = spt.adaptive_padding(count)
    ph, pw = spt.patch_size
    kernel = dict(kernel_size=(ph, pw), stride=(ph, pw), divisor_override=1)
    mass = F.avg_pool2d(mass, **kernel)
    # Every count is positive (not checked on the tensor, which would make a
    # GPU wait every step): a token's unshifted view is its own patch
    # window, and the adaptive padding is less than a patch, so that window
    # always holds a real position.
    count = F.avg_pool2d(count, **kernel)
    return flatten_label_map(mass / count)
