"""TL-Align through timm's Vision Transformer family (``vit_*``,
``deit_*``, ``deit3_*``, distilled DeiT, register tokens, qk-norm, layer
scale), bare or inside mmpretrain's ``TIMMBackbone`` (whose
``timm_model`` it reads; build it with
:func:`tlalign_mm.models.PooledTIMMBackbone` so that the head sees timm's
own pooled feature).

What timm's model computes, and what the taps read (timm 1.0.31,
``timm/models/vision_transformer.py``, ``timm/layers/attention.py``):

- **Patch tokens** start with the mean pixel label under each window of
  ``PatchEmbed.proj`` (the rule below, registered for
  ``timm.layers.patch_embed.PatchEmbed``; ``dynamic_img_pad`` pads the
  bottom/right, and padding carries no mass). The prefix tokens, class,
  distillation and register tokens, in ``_pos_embed``'s order, start with
  ``area_share`` (the area share lambda): registers, like the class token,
  are learned tokens that hold no pixel, so this is our choice.
- **Each block** (``Block``, ``ResPostBlock``) moves labels with the
  head-averaged attention of its ``timm.layers.Attention``. Both of its
  paths (``fused_attn``: ``F.scaled_dot_product_attention``, or the
  explicit ``softmax(q k^T scale)``) attend with ``q, k = self.q_norm(q),
  self.k_norm(k)`` and ``self.scale = head_dim ** -0.5`` (SDPA's default):
  forward hooks on ``q_norm`` and ``k_norm`` (``nn.Identity`` without
  qk-norm; a hook still sees its output) record exactly the q and k the
  attention uses, the very tensors its backward saves. Layer scale
  (``ls1``), the gate and the output projection leave labels alone, like
  the MLP.
- **Drop-path** (timm's ``DropPath``, whose ``bernoulli_`` draw is its
  own): the per-sample keep decision is read off ``drop_path1``'s output
  by the protocol (:mod:`.base`).
- **The readout** is timm's own head input (``forward_head``): the class
  token for ``global_pool='token'``; the mean over the tokens after the
  prefix (or all, with ``pool_include_prefix``) for ``'avg'``; the mean of
  the class and distillation tokens for distilled DeiT, whose head averages
  the two (the official code, which trains the distillation head with its
  own loss, reads the class token's label only). mmpretrain's
  ``TIMMBackbone`` turns pooling off (``reset_classifier(0, '')``): such a
  backbone outputs every token, and TL-Align asks for a pooled one.

Anything else timm builds (Swin, ConvNeXt, EVA, hybrid embeddings,
``PatchDropout``, attention pooling, parallel blocks) gets a clear error
that names what is supported.
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
    """``isinstance`` by import path, so nothing imports timm or mmpretrain
    just to look."""
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
    """timm's ``PatchEmbed``: the mean over the real positions under each
    window of its conv ``proj``. ``dynamic_img_pad`` zero-pads the
    bottom/right to a multiple of the patch first (mirrored from
    ``PatchEmbed.forward``, timm 1.0.31 ``layers/patch_embed.py``); without
    it the conv drops the remainder, like the tokens. Tokens come out in
    row-major order, flattened (``flatten``) or ``NHWC`` alike."""
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
    """timm ``VisionTransformer`` (and subclasses), bare or in mmpretrain's
    ``TIMMBackbone``. See the module docstring."""

    attention_types = (_ATTENTION, )

    def supports(self, backbone: nn.Module) -> bool:
        # Every timm model is this recorder's to accept or to refuse with a
        # timm-specific message (timm's Swin included).
        model = timm_model(backbone)
        return _is_a(backbone, _TIMM_BACKBONE) or \
            type(model).__module__.startswith('timm.') or \
            super().supports(backbone)

    def vit(self, backbone: nn.Module) -> nn.Module:
        """The timm ``VisionTransformer`` ``backbone`` is or wraps, or a
        clear error."""
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
