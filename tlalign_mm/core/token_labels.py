"""Initial token labels: how much of each source a token's pixels hold.

Labels are carried as per-token *source weights* ``(B, N, S)`` rather than as
class vectors ``(B, N, C)``: alignment is linear, so expanding to classes once
at the end (``weights @ targets``) gives the same result at a cost that does
not depend on the number of classes.
"""
from types import SimpleNamespace
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch.nn.modules.utils import _pair

_Pair = Tuple[int, int]


def window_mean(label_map: torch.Tensor,
                kernel_size,
                stride,
                padding=0,
                dilation=1,
                pre_pad: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Mean of a label map under every window of a convolution, over real
    positions only (padding carries no label mass, so a partially padded
    window's label still sums to 1): the label of a token a conv makes.

    Args:
        label_map (Tensor): ``(B, S, H, W)`` source weights of each position.
        kernel_size, stride, padding, dilation: the convolution's geometry
            (ints or pairs), as in :class:`torch.nn.Conv2d`.
        pre_pad (Sequence[int], optional): an explicit zero padding applied
            before the convolution, as ``(left, right, top, bottom)`` (the
            order of :func:`torch.nn.functional.pad`), e.g. mmcv's
            ``AdaptivePadding``.

    Returns:
        Tensor: ``(B, S, h, w)`` with ``h, w`` the convolution's output size.
    """
    B, S, H, W = label_map.shape
    kernel_size, stride = _pair(kernel_size), _pair(stride)
    padding, dilation = _pair(padding), _pair(dilation)
    pre = tuple(pre_pad) if pre_pad is not None else (0, 0, 0, 0)
    # Checked on the geometry (Python ints), not on the counts below:
    # reading a tensor would make a GPU wait in every training step.
    for size, k, st, p, d, (lo, hi) in zip((H, W), kernel_size, stride,
                                           padding, dilation,
                                           (pre[2:], pre[:2])):
        if _a_window_reads_only_padding(size, k, st, p, d, lo, hi):
            raise ValueError(
                'A token window covers only padding, so it has no label. The '
                f'geometry (kernel {kernel_size}, stride {stride}, padding '
                f'{padding}, dilation {dilation}, pre-padding {pre_pad}) '
                f'does not fit a {H}x{W} map.')
    valid = label_map.new_ones(1, 1, H, W)
    x = label_map.reshape(B * S, 1, H, W)
    if any(pre):
        x = F.pad(x, list(pre))
        valid = F.pad(valid, list(pre))
    if dilation == (1, 1) and all(p <= k // 2
                                  for p, k in zip(padding, kernel_size)):
        # Sum pooling: a memory-bound pass, where a ones-kernel convolution
        # costs a full fp32 convolution of the label map (slow on GPUs).
        pool = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                    count_include_pad=True, divisor_override=1)
        mass = F.avg_pool2d(x, **pool)
        count = F.avg_pool2d(valid, **pool)
    else:  # geometry pooling cannot express
        ones = label_map.new_ones(1, 1, *kernel_size)
        conv = dict(stride=stride, padding=padding, dilation=dilation)
        mass = F.conv2d(x, ones, **conv)
        count = F.conv2d(valid, ones, **conv)
    return (mass / count).reshape(B, S, *mass.shape[-2:])


def _a_window_reads_only_padding(size: int, kernel: int, stride: int,
                                 padding: int, dilation: int, pre_lo: int,
                                 pre_hi: int) -> bool:
    """Along one axis: whether some window of a convolution over a map of
    ``size`` real positions (after ``pre_lo``/``pre_hi`` explicit zero
    padding, then ``padding``) samples no real position."""
    length = pre_lo + size + pre_hi
    span = dilation * (kernel - 1) + 1
    for i in range((length + 2 * padding - span) // stride + 1):
        start = i * stride - padding
        # The first of the window's samples at or after the real region.
        j = max(0, -(-(pre_lo - start) // dilation))
        if j >= kernel or start + j * dilation >= pre_lo + size:
            return True
    return False


def flatten_label_map(label_map: torch.Tensor) -> torch.Tensor:
    """``(B, S, h, w)`` -> ``(B, h*w, S)``, in the token order of
    ``x.flatten(2).transpose(1, 2)`` that patch embeddings use."""
    return label_map.flatten(2).transpose(1, 2)


def label_map_of(tokens: torch.Tensor, hw: _Pair) -> torch.Tensor:
    """``(B, h*w, S)`` -> ``(B, S, h, w)``, the inverse of
    :func:`flatten_label_map`."""
    B, N, S = tokens.shape
    return tokens.transpose(1, 2).reshape(B, S, *hw)


def with_extra_tokens(patch_labels: torch.Tensor, area_share: torch.Tensor,
                      num_extra_tokens: int) -> torch.Tensor:
    """``(B, N, S)`` patch labels with ``num_extra_tokens`` tokens (class,
    distillation) labelled ``area_share`` ``(B, S)`` before them."""
    if num_extra_tokens == 0:
        return patch_labels
    extra = area_share[:, None, :].expand(-1, num_extra_tokens, -1)
    return torch.cat([extra.to(patch_labels), patch_labels], dim=1)


def readout(tokens: torch.Tensor,
            span: Tuple[int, Optional[int]]) -> torch.Tensor:
    """``(B, N, K)`` -> ``(B, K)``: the mean of ``tokens[:, start:stop]``,
    what a head reads (the class token is ``(0, 1)``; a token mean
    ``(num_extra_tokens, None)``), for labels and features alike."""
    start, stop = span
    if stop == start + 1:
        return tokens[:, start]
    return (tokens if span == (0, None) else tokens[:, start:stop]).mean(1)


def window_labels(window, label_map: torch.Tensor,
                  pre_pad: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Mean label under every window of ``window`` (a conv, an
    ``nn.Unfold``, :func:`as_conv_window`: anything with ``kernel_size``,
    ``stride``, ``padding``, ``dilation``) after ``pre_pad``.
    ``(B, S, H, W)`` -> ``(B, h*w, S)``."""
    if isinstance(window.padding, str):
        raise NotImplementedError(
            f'String padding {window.padding!r} in a token-making '
            f'{type(window).__name__} is not supported by TL-Align; use an '
            'integer padding.')
    return flatten_label_map(
        window_mean(label_map, window.kernel_size, window.stride,
                    window.padding, window.dilation, pre_pad))


def as_conv_window(kernel_size, stride, padding=0, dilation=1):
    """A stand-in with a conv's window geometry, for rules of modules that
    cut windows without a conv attribute."""
    return SimpleNamespace(kernel_size=kernel_size, stride=stride,
                           padding=padding, dilation=dilation)
