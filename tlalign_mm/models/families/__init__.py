"""Backbone families as descriptions: per family one function that reads a
built backbone and returns plain data, a :class:`Description` (which
modules to tap with which kind of :mod:`.taps`, the patch embedding, extra
tokens, token steps and where they run, what the head reads, the token
size), raising where a fact cannot be found.

Families are registered in :data:`FAMILIES` (an mmengine ``Registry``,
``tlalign_mm.registry``) under the import path of a class, by decorator, so
a downstream package adds one without editing ours::

    @FAMILIES.register_module('my_package.models.MyAttention')
    def describe_mine(backbone): ...

:func:`describe` finds a backbone's family by the backbone's own class
first (along its MRO), then by the modules it holds (its attention, for a
family that covers every backbone built from it: ``DeiT3``, SL-ViT and
SL-Swin need nothing of their own), timm models included. A refusal is
registered the same way (:func:`refused`); a backbone with no family gets
one message saying whether it has token attention at all.

The families of mmpretrain's, mmdet's and timm's ViT, BEiT, Swin and PVT
are in this file; each further family is a module of this package,
imported at the end of this file so that it registers.
"""
import re
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

import torch.nn as nn
import torch.nn.functional as F

from tlalign_mm.registry import FAMILIES

from ..token_rules import class_paths, is_a, lookup, token_rule, window_convs


class Tap(NamedTuple):
    """Record ``kind`` (a key of :data:`~tlalign_mm.models.taps.TAPS`) off
    ``module`` into block ``block``'s slot (a token step: of the block it
    precedes); ``arg``: what the kind needs besides the module."""
    block: int
    module: nn.Module
    kind: str
    arg: Any = None


class Description(NamedTuple):
    """What TL-Align needs to know about a built backbone: its ``blocks``
    in order; the ``taps``; the patch ``embed`` (its token rule gives the
    initial labels); ``extra_tokens``, ``head_after`` and ``readout`` (the
    head reads the mean of ``tokens[:, start:stop]``) as
    :class:`~tlalign_mm.core.Recorded`'s; ``token_size``: ``(h, w)``, the
    pixels a side of the tokens the first block attends over (what
    ``TLTokenCutMix`` cuts, TransMix's token mask and the presence analysis
    use; ``None``: not stated, and those refuse the backbone);
    ``extra_from``: the block the extra tokens join before (``0``: from
    the embedding on; T2T-ViT's class token joins after its T2T blocks,
    XCiT's before its first class-attention block),
    :class:`~tlalign_mm.core.Recorded`'s."""
    blocks: List[nn.Module]
    taps: List[Tap]
    embed: nn.Module
    extra_tokens: int = 0
    head_after: Optional[Tuple[int, bool]] = None
    readout: Tuple[int, Optional[int]] = (0, None)
    token_size: Optional[Tuple[int, int]] = None
    extra_from: int = 0


#: What a user can do about a backbone TL-Align does not describe.
ADD_A_FAMILY = ('Add a family (docs/design.md, "Adding a family") or train '
                'it with ImageClassifier.')


def not_described(backbone: nn.Module, family: str, what: str):
    """The error of a family that found its attention in ``backbone`` but
    not the layout it reads (``what``)."""
    name = type(backbone).__name__
    return NotImplementedError(
        f'{name} holds the attention of the {family} family but is not '
        f'built as that family reads it ({what}): no family describes '
        f'{name}. {ADD_A_FAMILY}')


def part(backbone: nn.Module, name: str, family: str) -> nn.Module:
    """``backbone.<name>`` (a module), or :func:`not_described`."""
    if not isinstance(getattr(backbone, name, None), nn.Module):
        raise not_described(backbone, family, f'it has no `{name}`')
    return getattr(backbone, name)


def vit_readout(backbone: nn.Module, num_blocks: int) -> Tuple[int, object]:
    """A token-sequence ViT's: the class token or the patch mean, by
    ``out_type``, of the last block (a ViT runs every block whatever
    ``out_indices`` says, and its head reads the last output)."""
    out = list(getattr(backbone, 'out_indices', [num_blocks - 1]))
    if num_blocks - 1 not in out:
        raise NotImplementedError(
            f"TL-Align labels the last block's tokens, but "
            f'{type(backbone).__name__} outputs blocks {out} of {num_blocks}'
            ' (out_indices). Use out_indices=-1.')
    out_type = getattr(backbone, 'out_type', None)
    if out_type not in ('cls_token', 'avg_featmap'):
        raise ValueError(f"TL-Align needs the label of what the head reads: "
                         f"out_type={out_type!r} gives token maps. Use "
                         "out_type='cls_token' or 'avg_featmap'.")
    return (0, 1) if out_type == 'cls_token' else (getattr(
        backbone, 'num_extra_tokens', 0), None)


def last_output_block(ends: List[int], out_indices) -> int:
    """The last block of the last stage a pyramid outputs (what a pooled
    head reads)."""
    stages = [i for i in range(len(ends)) if i in out_indices]
    if not stages:
        raise ValueError(f'TL-Align needs the label of what the head reads, '
                         f'but out_indices={out_indices} outputs no stage.')
    return ends[stages[-1]]


_MMPRETRAIN = 'mmpretrain.models.utils.attention.'


@FAMILIES.register_module(_MMPRETRAIN + 'MultiheadAttention')
def describe_vit(backbone: nn.Module) -> Description:
    """mmpretrain ``VisionTransformer`` (ViT, DeiT), distilled DeiT,
    ``DeiT3``, SL-ViT (LSA): ``MultiheadAttention`` blocks in
    ``backbone.layers``, whose ``forward`` passes views of ``qkv(x)`` to
    SDPA (mmpretrain 1.2.0, ``models/utils/attention.py``); the drop-path
    is its ``out_drop``."""
    layers, taps = list(part(backbone, 'layers', 'ViT')), []
    for i, layer in enumerate(layers):
        attns = [m for m in layer.modules()
                 if is_a(m, _MMPRETRAIN + 'MultiheadAttention')]
        if len(attns) != 1 or not isinstance(
                getattr(attns[0], 'qkv', None), nn.Linear):
            raise not_described(
                backbone, 'ViT', f'`layers[{i}]` holds {len(attns)} '
                'mmpretrain MultiheadAttention with a qkv Linear, not one')
        if attns[0].scaled_dot_product_attention is not \
                F.scaled_dot_product_attention:
            raise NotImplementedError(
                f'Block {i} attends with a custom function (mmpretrain\'s '
                "for qk_scale), not torch's SDPA; leave qk_scale unset.")
        taps += [Tap(i, attns[0].qkv, 'qkv', attns[0]),
                 Tap(i, getattr(attns[0], 'out_drop', None), 'keep')]
    embed = part(backbone, 'patch_embed', 'ViT')
    return Description(layers, taps, embed,
                       getattr(backbone, 'num_extra_tokens', 0), None,
                       vit_readout(backbone, len(layers)), embed_stride(embed))


def softmax_to_attn_drop(backbone: nn.Module, attention: str,
                         family: str) -> Description:
    """A ViT whose every layer's attention (class path ``attention``)
    computes its softmax inline and gives it to ``attn_drop``, an
    ``nn.Dropout``, and whose layer has one ``drop_path`` that runs on both
    branches, attention first (BEiT, EVA-02). Class token, embedding and
    readout: the ViT's."""
    layers, taps = list(part(backbone, 'layers', family)), []
    for i, layer in enumerate(layers):
        attn = getattr(layer, 'attn', None)
        if not is_a(attn, attention) or not isinstance(
                getattr(attn, 'attn_drop', None), nn.Dropout) or not hasattr(
                    layer, 'drop_path'):
            raise NotImplementedError(
                f"TL-Align records {family} layers with mmpretrain's "
                f"{attention.rsplit('.', 1)[-1]} (its attn_drop an "
                f'nn.Dropout) and a drop_path; layer {i} is a '
                f'{type(layer).__name__} with {type(attn).__name__}.')
        taps += [Tap(i, attn.attn_drop, 'attn_drop_input'),
                 Tap(i, layer.drop_path, 'keep')]
    embed = part(backbone, 'patch_embed', family)
    return Description(layers, taps, embed,
                       getattr(backbone, 'num_extra_tokens', 0), None,
                       vit_readout(backbone, len(layers)), embed_stride(embed))


@FAMILIES.register_module(_MMPRETRAIN + 'BEiTAttention')
def describe_beit(backbone: nn.Module) -> Description:
    """mmpretrain ``BEiTViT``: ``BEiTAttention`` builds q, k with its own
    biases and relative position bias, so no ``qkv`` output is the logits'
    input; its ``attn_drop`` (an ``nn.Dropout``) is given the softmax. The
    block's one ``drop_path`` runs on both branches, attention first.
    Extra tokens and readout: the ViT's."""
    return softmax_to_attn_drop(backbone, _MMPRETRAIN + 'BEiTAttention',
                                'BEiT')


@FAMILIES.register_module(_MMPRETRAIN + 'ShiftWindowMSA')
def describe_swin(backbone: nn.Module) -> Description:
    """mmpretrain ``SwinTransformer``, SL-Swin, ``SwinTransformerV2``: a
    ``ShiftWindowMSA`` whose window attention computes its softmax through
    ``w_msa.softmax`` (V1: scale and relative position bias; V2: cosine
    attention; masks applied; before dropout), its call's ``hw_shape``
    giving the window geometry. V1 merges after a stage's blocks, V2
    before; the head reads ``norm{i}`` of the last output stage (V1 with
    ``out_after_downsample``: after its merge)."""
    blocks, taps, ends = [], [], []
    for stage in part(backbone, 'stages', 'Swin'):
        merge = [] if stage.downsample is None else [stage.downsample]
        v2 = is_a(stage, 'mmpretrain.models.backbones.swin_transformer_v2.'
                  'SwinBlockV2Sequence')
        taps += [Tap(len(blocks), m, 'step') for m in merge if v2]
        for block in stage.blocks:
            msa, i = getattr(block, 'attn', None), len(blocks)
            if not is_a(msa, _MMPRETRAIN + 'ShiftWindowMSA') or not \
                    isinstance(getattr(msa.w_msa, 'softmax', None),
                               nn.Softmax):
                raise not_described(
                    backbone, 'Swin', f'block {i}, a {type(block).__name__},'
                    " has no `attn` that is mmpretrain's ShiftWindowMSA with "
                    'an nn.Softmax')
            blocks.append(block)
            taps += [Tap(i, msa.w_msa.softmax, 'softmax'),
                     Tap(i, msa, 'windows'), Tap(i, msa.drop, 'keep')]
        taps += [Tap(len(blocks), m, 'step') for m in merge if not v2]
        ends.append(len(blocks) - 1)
    last = last_output_block(ends, backbone.out_indices)
    through = getattr(backbone, 'out_after_downsample', False) and \
        backbone.stages[ends.index(last)].downsample is not None
    embed = part(backbone, 'patch_embed', 'Swin')
    return Description(blocks, taps, embed, 0, (last, through),
                       token_size=embed_stride(embed))


@FAMILIES.register_module(
    'mmdet.models.backbones.pvt.SpatialReductionAttention')

def describe_pvt(backbone: nn.Module) -> Description:
    """mmdet's ``PyramidVisionTransformer(V2)``: its
    ``SpatialReductionAttention`` calls ``nn.MultiheadAttention`` with the
    defaults ``need_weights=True, average_attn_weights=True``, on keys
    reduced by its ``sr`` conv; stage ``i``'s ``layers[i][0]`` embeds
    before its blocks; the head reads ``layers[i][2]`` (the stage's norm)
    of the last output stage. Ours: a reduced key's label is the mean of
    the labels its conv window pools; v2's ``MixFFN`` (its 3x3 depth-wise
    conv) is a residual branch that mixes neighbours, ``Y <- (Y + W Y) /
    2`` (docs/design.md, "Between attention blocks"); v1's is an MLP."""
    pvt = 'mmdet.models.backbones.pvt.'
    if not is_a(backbone, pvt + 'PyramidVisionTransformer'):
        raise not_described(backbone, 'PVT', "it is not mmdet's "
                            'PyramidVisionTransformer (v1, v2)')
    blocks, taps, ends = [], [], []
    for s, (embed, layers, _) in enumerate(backbone.layers):
        taps += [Tap(len(blocks), embed, 'step')] if s else []
        for layer in [m for m in layers if is_a(m, pvt + 'PVTEncoderLayer')]:
            sra, i = layer.attn, len(blocks)
            if not isinstance(sra.attn, nn.MultiheadAttention) or \
                    sra.attn.batch_first or sra.sr_ratio > 1 and (
                        not isinstance(sra.sr, nn.Conv2d)
                        or sra.sr.padding != (0, 0)):
                raise NotImplementedError(
                    'TL-Align records PVT attention by nn.MultiheadAttention '
                    '(batch_first=False), keys reduced by an unpadded Conv2d'
                    f'; block {i} has {sra.attn}, {getattr(sra, "sr", None)}.')
            blocks.append(layer)
            taps += [Tap(i, sra.attn, 'mha_weights'), Tap(i, sra, 'reduction'),
                     Tap(i, sra.dropout_layer, 'keep')]
            if window_convs(layer.ffn):  # v2's ConvFFN
                taps += [Tap(i, layer.ffn, 'branch'),
                         Tap(i, layer.ffn.dropout_layer, 'branch_keep')]
        ends.append(len(blocks) - 1)
    embed = backbone.layers[0][0]
    return Description(blocks, taps, embed, 0,
                       (last_output_block(ends, backbone.out_indices), False),
                       token_size=embed_stride(embed))


_TIMM = 'timm.models.vision_transformer.'
TIMM_SUPPORTED = ("timm's VisionTransformer family (ViT, DeiT, DeiT3, "
                  "registers; Block/ResPostBlock with timm's Attention)")


def timm_readout(model: nn.Module) -> Tuple[int, Optional[int]]:
    """What timm's ``forward_head`` reads: the class token (``'token'``),
    the mean after the prefix (``'avg'``; all with ``pool_include_prefix``),
    the class and distillation tokens' mean (distilled DeiT, whose
    ``distilled_training`` returns two logits: refused)."""
    pool = model.global_pool
    if getattr(model, 'distilled_training', False):
        raise NotImplementedError('timm: leave distilled_training off (two '
                                  'logits; TL-Align aligns one feature).')
    if is_a(model, 'timm.models.deit.VisionTransformerDistilled'):
        return (0, 2)
    if pool == '':  # mmpretrain's TIMMBackbone sets it
        raise ValueError("timm global_pool='' gives every token: build "
                         "type='PooledTIMMBackbone', global_pool='token'.")
    if pool not in ('token', 'avg') or getattr(model, 'attn_pool', None):
        raise NotImplementedError(
            f"timm global_pool={pool!r}: TL-Align aligns 'token' and 'avg' "
            "('max' is not linear, 'map'/'prr' pool with attention).")
    prefix = 0 if getattr(model, 'pool_include_prefix', False) else \
        model.num_prefix_tokens
    return (0, 1) if pool == 'token' else (prefix, None)


@FAMILIES.register_module(['timm.layers.attention.Attention',
                           _TIMM + 'VisionTransformer'])
def describe_timm(backbone: nn.Module) -> Description:
    """timm's ``VisionTransformer`` family, bare or in mmpretrain's
    ``TIMMBackbone`` (timm 1.0.31): both paths of ``timm.layers.Attention``
    (fused or explicit) attend with ``q_norm(q)``, ``k_norm(k)`` at
    ``scale`` (``nn.Identity`` without qk-norm); ``drop_path1`` is the
    attention branch's. Prefix tokens (class, distillation, registers)
    start at ``area_share``: registers hold no pixel (our choice)."""
    model = getattr(backbone, 'timm_model', backbone)  # TIMMBackbone's
    if not is_a(model, _TIMM + 'VisionTransformer'):
        raise NotImplementedError(
            f'TL-Align does not record timm {type(model).__name__}: only '
            f"{TIMM_SUPPORTED}. For Swin: mmpretrain's SwinTransformer.")
    if not isinstance(model.patch_drop, nn.Identity):
        raise NotImplementedError('timm patch_drop_rate > 0: TL-Align does '
                                  'not follow PatchDropout; set it to 0.')
    taps = []
    for i, block in enumerate(model.blocks):
        attn = getattr(block, 'attn', None)
        if not is_a(block, _TIMM + 'Block', _TIMM + 'ResPostBlock') or \
                not is_a(attn, 'timm.layers.attention.Attention'):
            raise NotImplementedError(
                f'TL-Align records {TIMM_SUPPORTED}; block {i} is a '
                f'{type(block).__name__} with {type(attn).__name__}.')
        taps += [Tap(i, attn.q_norm, 'q_norm', attn),
                 Tap(i, attn.k_norm, 'k_norm'),
                 Tap(i, block.drop_path1, 'keep')]
    return Description(list(model.blocks), taps, model.patch_embed,
                       model.num_prefix_tokens, None, timm_readout(model),
                       tuple(model.patch_embed.patch_size))


def refused(message: str) -> Callable[[nn.Module], Description]:
    """A family that refuses: raises ``message`` (``{type}``: the
    backbone's class name)."""
    def refuse(backbone: nn.Module) -> Description:
        raise NotImplementedError(message.format(type=type(backbone)
                                                 .__name__))
    return refuse


def attention_free(why: str) -> Callable[[nn.Module], Description]:
    """A refusal of a backbone that has token mixing, or modules named
    attention, but no attention between tokens (``why``)."""
    return refused('TL-Align aligns labels through attention; {type} has '
                   f'none ({why}). Train it with ImageClassifier.')


#: Backbones refused by class, each with its reason (registered like a
#: family; a downstream family for one registers with ``force=True``).
REFUSALS = {
        'mmpretrain.models.backbones.revvit.RevVisionTransformer': refused(
            'TL-Align does not support {type}: its reversible blocks add '
            'the attention of one half of the channels to the other half, '
            'which the label rule does not model.'),
        'timm.models.swin_transformer.SwinTransformer': refused(
            "TL-Align does not describe timm's Swin ({type}); mmpretrain's "
            "SwinTransformer (type='SwinTransformer') is described."),
        'mmpretrain.models.backbones.edgenext.EdgeNeXt': attention_free(
            'its SDTA attention mixes channels: each token attends over its '
            'own channels'),
        'mmpretrain.models.backbones.resnest.ResNeSt': attention_free(
            'its split attention weighs channel groups'),
        'mmpretrain.models.backbones.van.VAN': attention_free(
            "its large-kernel 'attention' is a convolution that gates "
            'channels'),
        'mmpretrain.models.backbones.conformer.Conformer': refused(
            'TL-Align does not support {type}: its CNN and transformer '
            'streams exchange features in every block (FCUDown, FCUUp) and '
            'its head classifies from both (a loss on each), where the '
            'label rule follows one token sequence to one readout. Train it '
            'with ImageClassifier, or TL-Align a one-stream transformer '
            '(DeiT, Swin).'),
}
for _path, _refusal in REFUSALS.items():
    FAMILIES.register_module(_path, module=_refusal)

#: Modules whose class name says attention (or ``nn.MultiheadAttention``):
#: what tells a backbone with token attention no family describes from one
#: with none.
ATTENTION_NAME = re.compile('attention|attn|msa', re.IGNORECASE)


def find_family(backbone: nn.Module) -> Callable[[nn.Module], Description]:
    """The family of ``backbone``: registered for its class (or a base), or
    else for the modules it holds (exactly one family among them); a clear
    error otherwise."""
    family = lookup(FAMILIES, backbone)
    if family is not None:
        return family
    found = {}
    for m in backbone.modules():
        family = lookup(FAMILIES, m)
        if family is not None:
            found.setdefault(family, class_paths(m)[0])
    name = type(backbone).__name__
    if len(found) > 1:
        raise NotImplementedError(
            f'{name} holds the modules of several TL-Align families '
            f'({", ".join(found.values())}): register a family for '
            f'{class_paths(backbone)[0]} itself (docs/design.md, "Adding a '
            'family").')
    if found:
        return found.popitem()[0]
    attention = sorted({class_paths(m)[0] for m in backbone.modules()
                        if isinstance(m, nn.MultiheadAttention)
                        or ATTENTION_NAME.search(type(m).__name__)})
    if not attention:
        raise NotImplementedError(
            f'TL-Align aligns labels through attention; {name} has none. '
            'Train it with ImageClassifier.')
    raise NotImplementedError(
        f'TL-Align has no family for {name}: none describes its attention '
        f'({", ".join(attention)}). {ADD_A_FAMILY}')


def describe(backbone: nn.Module) -> Description:
    """The :class:`Description` of ``backbone`` by its family
    (:func:`find_family`), its token rules checked; a clear error where
    TL-Align does not apply."""
    if not isinstance(backbone, nn.Module):
        raise TypeError(f'TL-Align records a module, got {backbone!r} (an '
                        "mmpretrain backbone's .eval() returns None).")
    description = find_family(backbone)(backbone)
    for module in [description.embed] + [
            t.module for t in description.taps
            if t.kind in ('step', 'branch')]:
        token_rule(module)
    return description


def embed_stride(embed: nn.Module) -> Optional[Tuple[int, int]]:
    """``(ph, pw)``: a patch embedding conv's stride, or its ``patch_size``
    (SPT); ``None`` if neither: the token size of the families whose first
    block attends over the embedding's tokens (a family whose embedding is
    followed by more token-making layers states its own)."""
    conv = getattr(embed, 'projection', None) or getattr(embed, 'proj', None)
    if isinstance(conv, nn.Conv2d):
        return tuple(int(s) for s in conv.stride)
    size = getattr(embed, 'patch_size', None)
    if isinstance(size, (tuple, list)) and len(size) == 2 and all(
            isinstance(s, int) for s in size):
        return tuple(size)
    return None


# Each further family is a module of this package (a description, about 40
# lines) and registers when imported here, one line per family, in
# alphabetical order (the I001 exemption keeps them one line each, so that
# families added side by side touch no other family's line):
from . import davit  # noqa: E402,F401,I001
from . import eva02  # noqa: E402,F401,I001
from . import hivit  # noqa: E402,F401,I001
from . import levit  # noqa: E402,F401,I001
from . import mvit  # noqa: E402,F401,I001
from . import t2t_vit  # noqa: E402,F401,I001
from . import tinyvit  # noqa: E402,F401,I001
from . import twins  # noqa: E402,F401,I001
from . import xcit  # noqa: E402,F401,I001
