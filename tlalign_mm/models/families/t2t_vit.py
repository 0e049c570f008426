"""T2T-ViT (mmpretrain ``T2T_ViT``): tokens-to-token blocks on soft splits
(``nn.Unfold``) of the image, then a ViT encoder with a class token."""
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.utils import _pair

from tlalign_mm.core import window_labels
from tlalign_mm.registry import FAMILIES, TOKEN_RULES

from ..token_rules import is_a
from . import Description, Tap, not_described, vit_readout

_MHA = 'mmpretrain.models.utils.attention.MultiheadAttention'


@TOKEN_RULES.register_module('torch.nn.modules.fold.Unfold')
def unfold_labels(unfold: nn.Module, label_map: torch.Tensor) -> torch.Tensor:
    """``nn.Unfold`` (T2T-ViT's soft splits): a token made of a window gets
    the window's mean label, padding carrying no mass; overlapping windows
    included. ``(B, S, H, W) -> (B, h*w, S)``."""
    return window_labels(unfold, label_map)


def attention_scale(attn: nn.Module):
    """The logits' scale of mmpretrain's ``MultiheadAttention``: ``None``
    (SDPA's ``head_dims ** -0.5``), or, with ``qk_scale`` set, mmpretrain
    1.2.0's ``scaled_dot_product_attention_pyimpl`` bound to ``scale=
    head_dims ** -0.5``, which it divides ``q k^T`` by
    (``models/utils/attention.py``, l. 36-43 and 561-564): ``head_dims **
    0.5``, whatever ``qk_scale`` says."""
    fn = attn.scaled_dot_product_attention
    if fn is F.scaled_dot_product_attention:
        return None
    if isinstance(fn, partial) and fn.func.__name__ == \
            'scaled_dot_product_attention_pyimpl' and not fn.args and set(
                fn.keywords) == {'scale'}:
        return 1 / (fn.keywords['scale'] or attn.head_dims**0.5)
    raise NotImplementedError(f'TL-Align does not know the scale {fn} '
                              'attends at.')


@FAMILIES.register_module('mmpretrain.models.backbones.t2t_vit.T2T_ViT')
def describe_t2t_vit(backbone: nn.Module) -> Description:
    """mmpretrain 1.2.0 ``T2T_ViT``: ``soft_split0`` embeds; the T2T blocks
    ``attention1`` (on ``soft_split0``'s tokens) and ``attention2`` (on
    ``soft_split1``'s), then the ``encoder`` layers on ``soft_split2``'s
    (projected), with the class token from the first of them on. Every
    layer is a ``T2TTransformerLayer`` whose ``MultiheadAttention`` attends
    at :func:`attention_scale` with ``out_drop`` its drop-path; a T2T block
    adds the attention to ``v`` (``v_shortcut``), a token-wise projection
    of its input, so its labels move as a residual block's. Token size: the
    stride of ``soft_split0`` (docs/design.md, the table of mmpretrain's
    backbones)."""
    t2t = backbone.tokens_to_token
    layers = [getattr(t2t, 'attention1', None),
              getattr(t2t, 'attention2', None), *backbone.encoder]
    taps = [Tap(1, t2t.soft_split1, 'step'), Tap(2, t2t.soft_split2, 'step')]
    for i, layer in enumerate(layers):
        attn = getattr(layer, 'attn', None)
        if not is_a(attn, _MHA) or not isinstance(attn.qkv, nn.Linear):
            raise not_described(backbone, 'ViT', f'block {i} has no `attn` '
                                "that is mmpretrain's MultiheadAttention")
        taps += [Tap(i, attn.qkv, 'qkv_scaled', (attn, attention_scale(attn))),
                 Tap(i, attn.out_drop, 'keep')]
    embed = t2t.soft_split0
    return Description(layers, taps, embed, backbone.num_extra_tokens, None,
                       vit_readout(backbone, len(backbone.encoder)),
                       _pair(embed.stride),
                       extra_from=2)
