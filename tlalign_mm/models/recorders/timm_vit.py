"""Recording timm's Vision Transformer family (``vit_*``, ``deit_*``,
``deit3_*``, distilled DeiT, register tokens, qk-norm, layer scale), bare
or in mmpretrain's ``TIMMBackbone`` (build it with
:func:`tlalign_mm.models.PooledTIMMBackbone`, so the head sees timm's own
pooled feature). timm 1.0.31, ``models/vision_transformer.py``,
``layers/attention.py``:

- Patch tokens: the mean pixel label under each window of
  ``PatchEmbed.proj`` (``dynamic_img_pad`` pads bottom/right, no mass). The
  prefix tokens (class, distillation, registers) start with ``area_share``:
  registers hold no pixel, like the class token (our choice).
- Blocks (``Block``, ``ResPostBlock``): both paths of ``timm.layers.
  Attention`` (``fused_attn`` or the explicit softmax) attend with ``q, k =
  self.q_norm(q), self.k_norm(k)`` at ``self.scale = head_dim ** -0.5``;
  forward hooks on ``q_norm``/``k_norm`` (``nn.Identity`` without qk-norm)
  record those very tensors. Layer scale, gate and projection leave labels
  alone; ``drop_path1``'s output gives the keep decision.
- Readout: timm's head input: the class token (``'token'``), the mean after
  the prefix (``'avg'``, or all with ``pool_include_prefix``), the mean of
  class and distillation tokens for distilled DeiT (its head averages the
  two). mmpretrain's ``TIMMBackbone`` turns pooling off; TL-Align asks for
  a pooled one.

Anything else timm builds (Swin, ConvNeXt, EVA, hybrid embeddings,
``PatchDropout``, attention pooling) gets a clear error naming what is
supported.
"""
from functools import partial
from typing import List

import torch
import torch.nn as nn

from tlalign_mm.core import Attention, Keys, flatten_label_map, window_mean

from .base import Block, Recorder
from .token_rules import register_token_rule

_TIMM_BACKBONE = 'mmpretrain.models.backbones.timm_backbone.TIMMBackbone'
_VIT = 'timm.models.vision_transformer.VisionTransformer'
_DISTILLED = 'timm.models.deit.VisionTransformerDistilled'
_ATTENTION = 'timm.layers.attention.Attention'
_BLOCKS = ('timm.models.vision_transformer.Block',
           'timm.models.vision_transformer.ResPostBlock')
_POOLS = ('token', 'avg')
SUPPORTED = ("timm's VisionTransformer family (vit_*, deit_*, deit3_*, "
             'distilled DeiT, register tokens; Block/ResPostBlock with '
             "timm's Attention, fused or explicit; global_pool 'token' or "
             "'avg')")


def _is_a(obj, path: str) -> bool:
    """``isinstance`` by import path (imports nothing)."""
    return any(f'{c.__module__}.{c.__qualname__}' == path
               for c in type(obj).__mro__)


def timm_model(backbone: nn.Module) -> nn.Module:
    """The timm model: ``TIMMBackbone.timm_model``, or ``backbone``."""
    if _is_a(backbone, _TIMM_BACKBONE):
        return backbone.timm_model
    return backbone


@register_token_rule('timm.layers.patch_embed.PatchEmbed')
def timm_patch_embed_labels(embed: nn.Module,
                            label_map: torch.Tensor) -> torch.Tensor:
    """timm's ``PatchEmbed``: the mean over real positions under each
    window of ``proj``, after ``dynamic_img_pad``'s bottom/right padding
    (mirrored from ``PatchEmbed.forward``, timm 1.0.31)."""
    pre_pad = None
    if embed.dynamic_img_pad:
        H, W = label_map.shape[-2:]
        ph, pw = embed.patch_size
        pre_pad = (0, (pw - W % pw) % pw, 0, (ph - H % ph) % ph)
    proj = embed.proj
    return flatten_label_map(
        window_mean(label_map, proj.kernel_size, proj.stride, proj.padding,
                    proj.dilation, pre_pad))


def _record_query(recording, attn, module, args, q) -> None:
    if recording.records is not None:
        recording.add(Attention(q.detach(), scale=attn.scale))


def _record_key(recording, module, args, k) -> None:
    if recording.records is not None:
        recording.add(Keys(k.detach()))


class TimmViTRecorder(Recorder):
    """timm ``VisionTransformer`` (and subclasses). See the module doc."""

    attention_types = (_ATTENTION, )

    def supports(self, backbone: nn.Module) -> bool:
        # Every timm model is this recorder's to accept or to refuse with a
        # timm-specific message (timm's Swin included).
        model = timm_model(backbone)
        return _is_a(backbone, _TIMM_BACKBONE) or \
            type(model).__module__.startswith('timm.') or \
            super().supports(backbone)

    def vit(self, backbone: nn.Module) -> nn.Module:
        """The timm ``VisionTransformer`` ``backbone`` is or wraps."""
        model = timm_model(backbone)
        if not _is_a(model, _VIT):
            raise NotImplementedError(
                f'TL-Align does not record timm {type(model).__name__} '
                f'({type(model).__module__}). Supported from timm: '
                f'{SUPPORTED}. For Swin, use mmpretrain\'s SwinTransformer '
                '(type=\'SwinTransformer\'), which TL-Align records.')
        return model

    def check(self, backbone: nn.Module) -> None:
        model = self.vit(backbone)
        name = type(model).__name__
        if not isinstance(model.patch_drop, nn.Identity):
            raise NotImplementedError(
                f'timm {name} has patch_drop_rate > 0: PatchDropout keeps a '
                'random subset of patch tokens per sample, which TL-Align '
                'does not follow. Build it with patch_drop_rate=0.')
        embed = self.patch_embed(backbone)
        if not _is_a(embed, 'timm.layers.patch_embed.PatchEmbed'):
            raise NotImplementedError(
                f'timm {name} embeds patches with {type(embed).__name__}; '
                "TL-Align has a label rule for timm's PatchEmbed only "
                '(hybrid CNN embeddings are not supported).')
        self.readout_kind(model)
        self.blocks(backbone)

    def blocks(self, backbone: nn.Module) -> List[Block]:
        blocks = []
        for i, block in enumerate(self.vit(backbone).blocks):
            attn = getattr(block, 'attn', None)
            if not any(_is_a(block, path) for path in _BLOCKS) or \
                    not _is_a(attn, _ATTENTION):
                raise NotImplementedError(
                    f'TL-Align records timm blocks x + attn(...) whose '
                    f"attention is timm's Attention (Block, ResPostBlock); "
                    f'block {i} is a {type(block).__name__} with '
                    f'{type(attn).__name__} attention. Supported from timm: '
                    f'{SUPPORTED}.')
            blocks.append(Block(block, attn, block.drop_path1))
        return blocks

    def patch_embed(self, backbone: nn.Module) -> nn.Module:
        return self.vit(backbone).patch_embed

    def num_extra_tokens(self, backbone: nn.Module) -> int:
        return self.vit(backbone).num_prefix_tokens

    def record_attention(self, block: Block, recording) -> list:
        attn = block.attention
        return [
            attn.q_norm.register_forward_hook(
                partial(_record_query, recording, attn)),
            attn.k_norm.register_forward_hook(
                partial(_record_key, recording)),
        ]

    @staticmethod
    def readout_kind(model: nn.Module) -> str:
        """``'distilled'``, ``'token'`` or ``'avg'``: how timm's
        ``forward_head`` reads the tokens; a clear error otherwise."""
        name = type(model).__name__
        if _is_a(model, _DISTILLED):
            if model.distilled_training:
                raise NotImplementedError(
                    f'timm {name} has distilled_training=True: it returns '
                    'the class and distillation logits separately in '
                    'training, and TL-Align aligns the one feature the head '
                    'sees. Leave distilled_training off (the head then '
                    'averages the two tokens).')
            return 'distilled'
        pool = model.global_pool
        if pool in _POOLS and getattr(model, 'attn_pool', None) is None:
            return pool
        if pool == '':
            raise ValueError(
                f'timm {name} has global_pool=\'\', so it returns every '
                "token (mmpretrain's TIMMBackbone sets this), and TL-Align "
                'needs the label of what the head classifies. Build it with '
                "type='PooledTIMMBackbone', global_pool='token' or 'avg' "
                '(tlalign_mm.models.PooledTIMMBackbone).')
        raise NotImplementedError(
            f"timm {name} pools with global_pool={pool!r}; TL-Align "
            "aligns 'token' (the class token) and 'avg' (the token mean), "
            "whose labels are those of the tokens they read; 'max'/"
            "'avgmax' are not linear in the tokens, and 'map'/'prr' pool "
            'with attention of their own.')

    def readout(self, backbone: nn.Module,
                tokens: torch.Tensor) -> torch.Tensor:
        model = self.vit(backbone)
        kind = self.readout_kind(model)
        if kind == 'distilled':
            return (tokens[:, 0] + tokens[:, 1]) / 2
        if kind == 'token':
            return tokens[:, 0]
        start = 0 if getattr(model, 'pool_include_prefix', False) else \
            model.num_prefix_tokens
        return tokens[:, start:].mean(1)
