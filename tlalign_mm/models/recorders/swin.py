"""Recording mmpretrain's ``SwinTransformer``, ``SwinTransformerV2`` and
SL-Swin: their ``ShiftWindowMSA`` wraps a ``WindowMSA``, a
``WindowMSAV2`` or LSA's ``LocalityWindowMSA``, each computing its softmax
through ``self.softmax``.

- ``w_msa.softmax`` (an ``nn.Softmax``): its output is the attention the
  tokens use (V1: scale and relative position bias; V2: cosine similarity
  times the clamped ``logit_scale`` plus ``16 * sigmoid`` of the CPB MLP;
  shift and LSA masks applied; before ``attn_drop``), saved by autograd
  anyway: recorded as probabilities.
- Token steps wherever they run (V1 merges after a stage's blocks, V2
  before them); the head reads ``norm{i}`` of the last output stage. V2's
  post-norm blocks (``x + norm1(attn(x))``) move labels as V1's: the
  dropped branch ``norm1(0)`` is a constant, which carries no token.
- ``ShiftWindowMSA``'s ``hw_shape`` gives the :class:`Windows` key map:
  labels padded, rolled and partitioned like the tokens
  (``window_partition``'s layout); ``Ā Y`` back like ``window_reverse``,
  the reverse roll and the crop. Mirrored from ``ShiftWindowMSA.forward``
  (mmpretrain 1.2.0): the bottom/right padding and the shift turned off
  when the map equals the window without ``pad_small_map``. Padded keys
  carry no label (our rule, :mod:`tlalign_mm.core.alignment`).
"""
from functools import partial
from typing import List, NamedTuple, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from tlalign_mm.core import Attention

from .base import Block, Recorder, last_output_stage
from .token_rules import token_rule


class Windows(NamedTuple):
    """How a ``ShiftWindowMSA`` call windows its ``hw`` map."""
    hw: Tuple[int, int]
    window_size: int
    shift: int
    pads: Tuple[int, int]

    @property
    def padded(self) -> bool:
        return any(self.pads)

    def to_keys(self, labels: torch.Tensor) -> torch.Tensor:
        """``(B, H*W, S)`` -> ``(nW*B, ws*ws, S)`` in the query windows'
        order, that of ``ShiftWindowMSA.window_partition`` (padded
        positions: zeros, no label)."""
        (H, W), ws, (pad_b, pad_r) = self.hw, self.window_size, self.pads
        B, S = labels.shape[0], labels.shape[-1]
        x = labels.view(B, H, W, S)
        if self.padded:
            x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        if self.shift > 0:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        x = x.view(B, x.shape[1] // ws, ws, x.shape[2] // ws, ws, S)
        return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, S)

    def to_queries(self, attended: torch.Tensor, mass):
        """The inverse of :meth:`to_keys` for ``Ā Y`` (and ``m``), that of
        ``window_reverse``, the reverse roll and the crop."""
        (H, W), ws, (pad_b, pad_r) = self.hw, self.window_size, self.pads
        if mass is not None:
            attended = torch.cat([attended, mass], -1)
        Hp, Wp, K = H + pad_b, W + pad_r, attended.shape[-1]
        x = attended.view(-1, Hp // ws, Wp // ws, ws, ws, K)
        x = x.permute(0, 1, 3, 2, 4, 5).reshape(-1, Hp, Wp, K)
        if self.shift > 0:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        if self.padded:
            x = x[:, :H, :W, :]
        x = x.reshape(x.shape[0], H * W, K)
        if mass is None:
            return x, None
        return x[..., :-1], x[..., -1:]


def _record_softmax(recording, module, args, probs) -> None:
    if recording.records is not None:
        recording.add(Attention(probs=probs.detach()))


def _record_windows(recording, msa, module, args, kwargs, output) -> None:
    if recording.records is None:
        return
    hw = args[1] if len(args) > 1 else kwargs['hw_shape']
    H, W = int(hw[0]), int(hw[1])
    ws, shift = msa.window_size, msa.shift_size
    if min(H, W) == ws and not msa.pad_small_map:
        shift = 0  # mirrors ShiftWindowMSA.forward
    recording.add(Windows((H, W), ws, shift,
                          ((ws - H % ws) % ws, (ws - W % ws) % ws)))


class SwinRecorder(Recorder):
    """mmpretrain ``SwinTransformer`` (and SL-Swin), ``SwinTransformerV2``.
    See the module docstring."""

    attention_types = ('mmpretrain.models.utils.attention.ShiftWindowMSA', )

    def check(self, backbone: nn.Module) -> None:
        if not hasattr(backbone, 'stages'):
            raise NotImplementedError(
                'TL-Align records Swin transformers whose blocks are '
                f'backbone.stages[i].blocks; {type(backbone).__name__} has '
                'no stages.')
        self.blocks(backbone)
        self.head_input(backbone)
        for stage in backbone.stages:
            merge = getattr(stage, 'downsample', None)
            if merge is not None and token_rule(merge) is None:
                raise NotImplementedError(
                    f'TL-Align has no label rule for {type(merge).__name__}'
                    ", the downsample of a Swin stage; register one with "
                    'tlalign_mm.models.recorders.register_token_rule.')

    def blocks(self, backbone: nn.Module) -> List[Block]:
        blocks = []
        for stage in backbone.stages:
            for block in stage.blocks:
                msa = block.attn
                w_msa = getattr(msa, 'w_msa', None)
                if not self.is_attention(msa) or not isinstance(
                        getattr(w_msa, 'softmax', None), nn.Softmax):
                    raise NotImplementedError(
                        'TL-Align records Swin blocks whose attention is '
                        "mmpretrain's ShiftWindowMSA with a WindowMSA that "
                        'computes its softmax through self.softmax; this '
                        f'block uses {type(msa).__name__}.')
                blocks.append(Block(block, msa, msa.drop))
        return blocks

    def record_attention(self, block: Block, recording) -> list:
        msa = block.attention
        return [
            msa.w_msa.softmax.register_forward_hook(
                partial(_record_softmax, recording)),
            msa.register_forward_hook(partial(_record_windows, recording,
                                              msa), with_kwargs=True),
        ]

    def head_input(self, backbone: nn.Module) -> nn.Module:
        """``norm{i}`` of the stage whose output is the forward's last."""
        stage = last_output_stage(len(backbone.stages), backbone.out_indices)
        return getattr(backbone, f'norm{stage}')
