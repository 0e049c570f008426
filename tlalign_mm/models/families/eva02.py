"""EVA-02 (mmpretrain ``ViTEVA02``): a ViT whose attention rotates q and k
(2D RoPE) and whose FFN is a SwiGLU (token-wise: it leaves labels alone)."""
import torch.nn as nn

from tlalign_mm.registry import FAMILIES

from ..token_rules import is_a
from . import Description, Tap, embed_stride, part, vit_readout

_EVA02 = 'mmpretrain.models.backbones.vit_eva02.'


@FAMILIES.register_module(_EVA02 + 'AttentionWithRoPE')
def describe_eva02(backbone: nn.Module) -> Description:
    """mmpretrain 1.2.0 ``ViTEVA02``: each ``EVA02EndcoderLayer``'s
    ``AttentionWithRoPE`` computes its softmax inline (of the RoPE'd q and
    k) and gives it to ``attn_drop``, an ``nn.Dropout``; the layer's one
    ``drop_path`` runs on both branches, attention first (as BEiT's). Class
    token, mmcv ``PatchEmbed`` and readout: the ViT's."""
    layers, taps = list(part(backbone, 'layers', 'EVA-02')), []
    for i, layer in enumerate(layers):
        attn = getattr(layer, 'attn', None)
        if not is_a(attn, _EVA02 + 'AttentionWithRoPE') or not isinstance(
                attn.attn_drop, nn.Dropout) or not hasattr(layer, 'drop_path'):
            raise NotImplementedError(
                "TL-Align records EVA-02 layers with mmpretrain's "
                'AttentionWithRoPE (its attn_drop an nn.Dropout) and a '
                f'drop_path; layer {i} is a {type(layer).__name__} with '
                f'{type(attn).__name__}.')
        taps += [Tap(i, attn.attn_drop, 'attn_drop_input'),
                 Tap(i, layer.drop_path, 'keep')]
    embed = part(backbone, 'patch_embed', 'EVA-02')
    return Description(layers, taps, embed,
                       getattr(backbone, 'num_extra_tokens', 0), None,
                       vit_readout(backbone, len(layers)), embed_stride(embed))
