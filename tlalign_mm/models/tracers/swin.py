"""TL-Align through mmpretrain's ``SwinTransformer`` (tiny/small/base/large,
custom archs, and SL-Swin: SPT embedding and pooling have their own token
rules, and LSA's ``LocalityWindowMSA`` computes its softmax through
``self.softmax`` like ``WindowMSA``).

The backbone runs its own forward; nothing in the tokens' path is replaced,
so the tokens are bit-identical to a plain forward, in eval and in training.
Per block, the taps of :class:`WindowAttentionTap` follow the tokens' path:

- ``ShiftWindowMSA`` (pre-hook): its ``hw_shape``;
- ``WindowMSA`` (pre-hook): whether it got a shift mask, i.e. whether this
  call shifts. The labels are padded, rolled and partitioned into windows
  like the tokens, with ``ShiftWindowMSA``'s own ``window_partition``;
- ``WindowMSA.softmax`` (hook): its output is the attention the tokens use,
  after scale, relative position bias, shift mask and softmax, before
  ``attn_drop``. Head-averaged, it moves the windowed labels;
- ``ShiftWindowMSA`` (hook): the attended labels go back through
  ``window_reverse``, the reverse roll and the crop.

Merging (``PatchMerging``: the mean of the merged labels) and the readout
(the mean over the tokens ``norm{i}`` of the last output stage receives)
are the protocol's (:mod:`.base`, :mod:`.token_rules`). Padding to a
multiple of the window is our choice of rule, stated in
:mod:`tlalign_mm.core.alignment`: padded keys carry no label and the update
is renormalised.

Only two lines of ``ShiftWindowMSA.forward`` (mmpretrain 1.2.0,
``models/utils/attention.py``) are mirrored: the bottom/right padding to a
multiple of the window, ``pad_r``/``pad_b``. Whether a call shifts is read
from the mask it passes to ``WindowMSA`` (``get_attn_mask`` returns ``None``
exactly when the effective shift is 0, e.g. in a stage whose map equals the
window, where mmpretrain turns the shift off), not re-derived.
"""
from typing import Callable, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .base import (
    BlockTrace,
    TracedBlock,
    Tracer,
    label_math,
    last_output_stage,
)


def _window_pads(hw, window_size):
    """``(pad_b, pad_r)``, mirroring ``ShiftWindowMSA.forward``:
    ``pad_r = (window_size - W % window_size) % window_size`` (and ``pad_b``
    likewise)."""
    H, W = hw
    return ((window_size - H % window_size) % window_size,
            (window_size - W % window_size) % window_size)


def partition_labels(attn: nn.Module, labels: torch.Tensor, hw, shift: int,
                     with_mass: bool) -> torch.Tensor:
    """Window the labels like ``ShiftWindowMSA.forward`` windows its query.

    Args:
        attn (ShiftWindowMSA): the block's attention.
        labels (Tensor): ``(B, H*W, S)``.
        hw (tuple): ``(H, W)``.
        shift (int): the effective shift of this call.
        with_mass (bool): append a channel of ones that marks real tokens
            (the map is padded: padded positions are zeros in every
            channel, so they carry no label and no mass).

    Returns:
        Tensor: ``(nW*B, ws*ws, S[+1])`` in the order of the query windows.
    """
    B, L, S = labels.shape
    H, W = hw
    ws = attn.window_size
    x = labels
    if with_mass:
        x = torch.cat([labels, labels.new_ones(B, L, 1)], -1)
    x = x.view(B, H, W, -1)
    pad_b, pad_r = _window_pads(hw, ws)
    if pad_b or pad_r:
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    if shift > 0:
        x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
    return attn.window_partition(x, ws).view(-1, ws * ws, x.shape[-1])


def reverse_labels(attn: nn.Module, windows: torch.Tensor, hw,
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
    if pad_b or pad_r:
        x = x[:, :H, :W, :]
    return x.reshape(x.shape[0], H * W, K)


class WindowAttentionTap:
    """The hooks that hand one ``SwinBlock``'s trace its ``Ā Y``."""

    def __init__(self, msa: nn.Module, trace: BlockTrace):
        self.msa = msa
        self.trace = trace
        self._clear()

    def _clear(self):
        self.hw = None
        self.shift = 0
        self.windows: Optional[torch.Tensor] = None
        self.attended: Optional[torch.Tensor] = None
        self.softmax_calls = 0

    def before_msa(self, module, args, kwargs):
        if self.trace.state is None:
            return
        self._clear()
        hw = args[1] if len(args) > 1 else kwargs['hw_shape']
        self.hw = (int(hw[0]), int(hw[1]))

    def before_window(self, module, args, kwargs):
        state = self.trace.state
        if state is None:
            return
        if self.hw is None:
            raise RuntimeError('WindowMSA ran outside its ShiftWindowMSA; '
                               'TL-Align cannot place its labels.')
        mask = kwargs['mask'] if 'mask' in kwargs else (
            args[1] if len(args) > 1 else None)
        self.shift = self.msa.shift_size if mask is not None else 0
        if not state.aligns():
            return
        pad_b, pad_r = _window_pads(self.hw, self.msa.window_size)
        with label_math(state.labels.device.type):
            windows = partition_labels(self.msa, state.labels, self.hw,
                                       self.shift, bool(pad_b or pad_r))
        query = args[0]
        if windows.shape[:2] != query.shape[:2]:
            raise RuntimeError(
                f'Label windows {tuple(windows.shape[:2])} do not match the '
                f'query windows {tuple(query.shape[:2])}: ShiftWindowMSA '
                'took a path TL-Align does not follow.')
        self.windows = windows

    def after_softmax(self, module, args, output):
        if self.trace.state is None:
            return
        self.softmax_calls += 1
        if self.windows is None:
            return
        with label_math(output.device.type):
            self.attended = torch.bmm(output.detach().float().mean(1),
                                      self.windows)
        self.windows = None

    def after_msa(self, module, args, kwargs, output):
        state = self.trace.state
        if state is None:
            return
        if self.softmax_calls != 1:
            calls = self.softmax_calls
            self._clear()
            raise RuntimeError(
                f'WindowMSA computed its softmax {calls} times in one '
                'forward; TL-Align expects exactly one.')
        if self.attended is None:
            self.trace.attend(None)
        else:
            with label_math(state.labels.device.type):
                out = reverse_labels(self.msa, self.attended, self.hw,
                                     self.shift)
            S = state.labels.shape[-1]
            mass = out[..., S:] if out.shape[-1] > S else None
            self.trace.attend(out[..., :S], mass)
        self._clear()


class SwinTracer(Tracer):
    """mmpretrain ``SwinTransformer`` and subclasses (SL-Swin). See the
    module docstring; the padding rule is in
    :mod:`tlalign_mm.core.alignment`."""

    attention_types = ('mmpretrain.models.utils.attention.ShiftWindowMSA', )

    def check(self, backbone: nn.Module) -> None:
        if not hasattr(backbone, 'stages'):
            raise NotImplementedError(
                'TL-Align traces Swin transformers whose blocks are '
                f'backbone.stages[i].blocks; {type(backbone).__name__} has '
                'no stages.')
        self.blocks(backbone)
        self.output_module(backbone)

    def blocks(self, backbone: nn.Module) -> List[TracedBlock]:
        blocks = []
        for stage in backbone.stages:
            for block in stage.blocks:
                msa = block.attn
                w_msa = getattr(msa, 'w_msa', None)
                if not self.is_attention(msa) or not isinstance(
                        getattr(w_msa, 'softmax', None), nn.Softmax):
                    raise NotImplementedError(
                        'TL-Align traces Swin blocks whose attention is '
                        "mmpretrain's ShiftWindowMSA with a WindowMSA that "
                        'computes its softmax through self.softmax; this '
                        f'block uses {type(msa).__name__}.')
                blocks.append(TracedBlock(block, msa, msa.drop))
        return blocks

    def tap_attention(self, block: TracedBlock,
                      trace: BlockTrace) -> List[Callable[[], None]]:
        msa = block.attention
        tap = WindowAttentionTap(msa, trace)
        handles = [
            msa.register_forward_pre_hook(tap.before_msa, with_kwargs=True),
            msa.w_msa.register_forward_pre_hook(tap.before_window,
                                                with_kwargs=True),
            msa.w_msa.softmax.register_forward_hook(tap.after_softmax),
            msa.register_forward_hook(tap.after_msa, with_kwargs=True),
        ]
        return [h.remove for h in handles]

    def output_module(self, backbone: nn.Module) -> nn.Module:
        """``norm{i}`` of the stage whose output is the forward's last."""
        stage = last_output_stage(len(backbone.stages), backbone.out_indices)
        return getattr(backbone, f'norm{stage}')
