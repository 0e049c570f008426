"""TL-Align through mmpretrain's ``SwinTransformer`` (tiny/small/base/large
and custom archs).

The backbone runs its own forward; nothing in the tokens' path is replaced,
so the tokens are bit-identical to a plain forward, in eval and in training.
Hooks read what the forward computes and move the labels along the same
path:

- ``ShiftWindowMSA`` (pre-hook): its ``hw_shape``.
- ``WindowMSA`` (pre-hook): whether it got a shift mask, i.e. whether this
  call shifts. The labels are padded, rolled and partitioned into windows
  like the tokens, with ``ShiftWindowMSA``'s own ``window_partition``.
- ``WindowMSA.softmax`` (hook): its output is the attention the tokens use,
  after scale, relative position bias, shift mask and softmax, before
  ``attn_drop``. Head-averaged, it moves the windowed labels.
- ``ShiftWindowMSA`` (hook): the attended labels go back through
  ``window_reverse``, the reverse roll and the crop; the block's step is
  taken with the keep mask its ``drop`` (drop-path) drew.
- ``PatchMerging`` (pre-hook): merged tokens get the mean label of the
  tokens they merge (their sum, renormalised; its padding carries no mass).
- ``norm{i}`` of the last output stage (pre-hook): the labels the
  classification head reads, pooled.

Only two lines of ``ShiftWindowMSA.forward`` (mmpretrain 1.2.0,
``models/utils/attention.py``) are mirrored: the bottom/right padding to a
multiple of the window, ``pad_r``/``pad_b``. Whether a call shifts is read
from the mask it passes to ``WindowMSA`` (``get_attn_mask`` returns ``None``
exactly when the effective shift is 0, e.g. in a stage whose map equals the
window, where mmpretrain turns the shift off), not re-derived.
"""
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import PatchMerging
from mmpretrain.models.backbones import SwinTransformer
from mmpretrain.models.utils import ShiftWindowMSA, WindowMSA

from tlalign_mm.core import AlignmentState, label_map_of

from .base import (
    capture_output_labels,
    last_output_stage,
    patch_embed_labels,
    pooled_output_labels,
    record_drop_path,
)


def _window_pads(hw, window_size):
    """``(pad_b, pad_r)``, mirroring ``ShiftWindowMSA.forward``:
    ``pad_r = (window_size - W % window_size) % window_size`` (and ``pad_b``
    likewise)."""
    H, W = hw
    return ((window_size - H % window_size) % window_size,
            (window_size - W % window_size) % window_size)


def partition_labels(attn: ShiftWindowMSA, labels: torch.Tensor, hw,
                     shift: int) -> torch.Tensor:
    """Window the labels like ``ShiftWindowMSA.forward`` windows its query.

    A last channel of ones marks real tokens: padded positions are zeros in
    every channel, so they carry no label and no mass.

    Args:
        attn (ShiftWindowMSA): the block's attention.
        labels (Tensor): ``(B, H*W, S)``.
        hw (tuple): ``(H, W)``.
        shift (int): the effective shift of this call.

    Returns:
        Tensor: ``(nW*B, ws*ws, S + 1)`` in the order of the query windows.
    """
    B, L, S = labels.shape
    H, W = hw
    ws = attn.window_size
    x = torch.cat([labels, labels.new_ones(B, L, 1)], -1).view(B, H, W, S + 1)
    pad_b, pad_r = _window_pads(hw, ws)
    x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    if shift > 0:
        x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
    return attn.window_partition(x, ws).view(-1, ws * ws, S + 1)


def reverse_labels(attn: ShiftWindowMSA, windows: torch.Tensor, hw,
                   shift: int) -> torch.Tensor:
    """The inverse of :func:`partition_labels`: ``window_reverse``, reverse
    roll and crop. ``(nW*B, ws*ws, K)`` -> ``(B, H*W, K)``."""
    H, W = hw
    ws = attn.window_size
    pad_b, pad_r = _window_pads(hw, ws)
    K = windows.shape[-1]
    x = attn.window_reverse(windows.view(-1, ws, ws, K), H + pad_b, W + pad_r,
                            ws)
    if shift > 0:
        x = torch.roll(x, shifts=(shift, shift), dims=(1, 2))
    return x[:, :H, :W, :].reshape(x.shape[0], H * W, K)


def renormalised_step_input(labels: torch.Tensor, attended: torch.Tensor,
                            mass: torch.Tensor,
                            residual_norm: bool) -> torch.Tensor:
    """What to pass to :meth:`AlignmentState.step` so that the new label is
    the paper's update renormalised to sum 1.

    With zero-label padded keys, ``ĀY`` of a real token holds only the mass
    ``m = Ā·1_real <= 1`` its attention puts on real tokens, so the paper's
    ``(Y + ĀY) / 2`` sums to ``(1 + m) / 2``. The new label is that update
    divided by its sum, ``(Y + ĀY) / (1 + m)`` (``ĀY / m`` without the
    residual average). As ``state.step`` applies ``(Y + a) / 2`` itself,
    this returns ``a = ((1 - m) Y + 2 ĀY) / (1 + m)``, non-negative and
    summing to 1. Without padding ``m = 1`` and ``a = ĀY``.

    Args:
        labels (Tensor): ``(B, N, S)`` labels entering the block.
        attended (Tensor): ``(B, N, S)`` ``ĀY`` with zero-label padding.
        mass (Tensor): ``(B, N, 1)`` ``m``.
        residual_norm (bool): the state's option.
    """
    if not residual_norm:
        # m > 0 always (a real token attends to itself), unless softmax
        # underflowed to 0 on every real key: then the token keeps its label.
        return torch.where(mass > 0, attended / mass.clamp_min(1e-30), labels)
    return ((1 - mass) * labels + 2 * attended) / (1 + mass)


@contextmanager
def trace_window_block(attn: ShiftWindowMSA, state: AlignmentState,
                       follow_drop_path: bool):
    """Trace one ``SwinBlock`` through its ``ShiftWindowMSA``."""
    w_msa = attn.w_msa
    if not isinstance(w_msa, WindowMSA) or not isinstance(
            getattr(w_msa, 'softmax', None), nn.Softmax):
        raise NotImplementedError(
            'TL-Align traces Swin blocks whose window attention is '
            f'mmpretrain WindowMSA; this block uses {type(w_msa).__name__}.')
    call: dict = {}
    keeps: List[Optional[torch.Tensor]] = []

    def before_attn(module, args, kwargs):
        call.clear()
        hw = args[1] if len(args) > 1 else kwargs['hw_shape']
        call['hw'] = (int(hw[0]), int(hw[1]))
        call['softmax_calls'] = 0

    def before_window(module, args, kwargs):
        if 'hw' not in call:
            raise RuntimeError('WindowMSA ran outside its ShiftWindowMSA; '
                               'TL-Align cannot place its labels.')
        mask = kwargs['mask'] if 'mask' in kwargs else (
            args[1] if len(args) > 1 else None)
        call['shift'] = attn.shift_size if mask is not None else 0
        if not state.aligns(state.layer):
            return
        with torch.no_grad(), torch.autocast(state.labels.device.type,
                                             enabled=False):
            windows = partition_labels(attn, state.labels, call['hw'],
                                       call['shift'])
        query = args[0]
        if windows.shape[:2] != query.shape[:2]:
            raise RuntimeError(
                f'Label windows {tuple(windows.shape[:2])} do not match the '
                f'query windows {tuple(query.shape[:2])}: ShiftWindowMSA '
                'took a path TL-Align does not follow.')
        call['windows'] = windows

    def after_softmax(module, args, output):
        call['softmax_calls'] = call.get('softmax_calls', 0) + 1
        if 'windows' not in call:
            return
        with torch.no_grad(), torch.autocast(output.device.type,
                                             enabled=False):
            mean_attn = output.detach().float().mean(1)
            call['attended'] = torch.bmm(mean_attn, call.pop('windows'))

    def after_attn(module, args, kwargs, output):
        if call.get('softmax_calls') != 1:
            raise RuntimeError(
                f'WindowMSA computed its softmax {call.get("softmax_calls")} '
                'times in one forward; TL-Align expects exactly one.')
        keep = keeps[-1] if (follow_drop_path and keeps) else None
        attended = None
        if 'attended' in call:
            with torch.no_grad(), torch.autocast(
                    state.labels.device.type, enabled=False):
                out = reverse_labels(attn, call['attended'], call['hw'],
                                     call['shift'])
                attended = renormalised_step_input(state.labels,
                                                   out[..., :-1],
                                                   out[..., -1:],
                                                   state.residual_norm)
        call.clear()
        keeps.clear()
        state.step(attended, keep)

    with ExitStack() as stack:
        stack.enter_context(record_drop_path(attn.drop, keeps))
        for handle in (
                attn.register_forward_pre_hook(before_attn, with_kwargs=True),
                w_msa.register_forward_pre_hook(
                    before_window, with_kwargs=True),
                w_msa.softmax.register_forward_hook(after_softmax),
                attn.register_forward_hook(after_attn, with_kwargs=True)):
            stack.callback(handle.remove)
        yield


def merge_labels(merging: PatchMerging, labels: torch.Tensor,
                 hw) -> torch.Tensor:
    """Labels of the tokens an mmcv ``PatchMerging`` makes: the mean label
    of the tokens each ``nn.Unfold`` window gathers (their sum,
    renormalised), its adaptive padding carrying no mass.
    ``(B, H*W, S)`` -> ``(B, h*w, S)``."""
    as_conv = SimpleNamespace(projection=merging.sampler,
                              adaptive_padding=merging.adaptive_padding)
    return patch_embed_labels(as_conv, label_map_of(labels, hw))


@contextmanager
def trace_patch_merging(merging: PatchMerging, state: AlignmentState):
    if not isinstance(merging, PatchMerging):
        raise NotImplementedError(
            'TL-Align traces mmcv PatchMerging between Swin stages; this '
            f'model uses {type(merging).__name__}.')

    def before_merge(module, args, kwargs):
        hw = args[1] if len(args) > 1 else kwargs['input_size']
        hw = (int(hw[0]), int(hw[1]))
        if state.labels.shape[1] != hw[0] * hw[1]:
            raise RuntimeError(
                f'PatchMerging got a {hw[0]}x{hw[1]} map but the labels hold '
                f'{state.labels.shape[1]} tokens.')
        with torch.no_grad(), torch.autocast(state.labels.device.type,
                                             enabled=False):
            state.replace(merge_labels(module, state.labels, hw))

    handle = merging.register_forward_pre_hook(before_merge, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


class SwinTracer:
    """Token labels for :class:`mmpretrain.models.SwinTransformer`.

    - Patch tokens start with the mean pixel weights of their patch (the
      patch embedding's padding carries no mass).
    - Each ``SwinBlock`` moves labels with the head-averaged window
      attention of its ``ShiftWindowMSA``, on the path the tokens take:
      padding to a multiple of the window, cyclic shift, window partition,
      attention (relative position bias and shift mask included), window
      reverse, reverse shift, crop. Attention dropout is not followed
      (labels use the attention before it); the attention branch's
      drop-path is (``follow_drop_path``).
    - ``PatchMerging`` gives a merged token the mean label of the tokens it
      merges.
    - The readout is the mean over the tokens of the last output stage
      (``feats[-1]``, which ``GlobalAveragePooling`` and the head read), at
      the point ``norm{i}`` sees them (after the stage's ``PatchMerging``
      with ``out_after_downsample=True``).

    Padding (our choice, not the paper's, whose Swin runs 224x224 inputs with
    no padding): padded positions are zero tokens that take part in the
    window attention as keys like any token, and carry a zero label. The
    share of attention a real token puts on them moves no label mass, so the
    paper's ``(Y + ĀY) / 2`` sums to ``(1 + m) / 2`` with ``m`` the token's
    attention on real tokens; we renormalise the new label to sum 1,
    ``(Y + ĀY) / (1 + m)``. A padded key's value is the value projection of
    a zero token (its bias), i.e. no image content: renormalising the whole
    label, rather than ``Ā`` over real keys only, gives the attention branch
    the weight of the image content it actually brings. Without padding
    (``m = 1``) this is the paper's rule.
    """

    @staticmethod
    def supports(backbone: nn.Module) -> bool:
        return isinstance(backbone, SwinTransformer)

    @staticmethod
    def num_layers(backbone) -> int:
        return sum(len(stage.blocks) for stage in backbone.stages)

    def initial_labels(self, backbone, pixel_weights: torch.Tensor,
                       cls_weights: torch.Tensor) -> torch.Tensor:
        return patch_embed_labels(backbone.patch_embed, pixel_weights)

    @staticmethod
    def output_stage(backbone) -> int:
        """The stage whose output is the last of the forward's tuple."""
        return last_output_stage(len(backbone.stages), backbone.out_indices)

    @contextmanager
    def trace(self, backbone, state: AlignmentState,
              follow_drop_path: bool = True):
        norm = getattr(backbone, f'norm{self.output_stage(backbone)}')
        with ExitStack() as stack:
            for stage in backbone.stages:
                for block in stage.blocks:
                    if not isinstance(block.attn, ShiftWindowMSA):
                        raise NotImplementedError(
                            'TL-Align traces Swin blocks with mmpretrain '
                            'ShiftWindowMSA; this block uses '
                            f'{type(block.attn).__name__}.')
                    stack.enter_context(
                        trace_window_block(block.attn, state,
                                           follow_drop_path))
                if stage.downsample is not None:
                    stack.enter_context(
                        self.trace_downsample(stage.downsample, state))
            stack.enter_context(capture_output_labels(norm, state))
            yield

    def trace_downsample(self, downsample: nn.Module, state: AlignmentState):
        """The context that carries labels through a stage's
        downsampling."""
        return trace_patch_merging(downsample, state)

    def readout(self, backbone, state: AlignmentState) -> torch.Tensor:
        return pooled_output_labels(backbone, state,
                                    self.output_stage(backbone))
