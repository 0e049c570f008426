"""EVA-02 (mmpretrain ``ViTEVA02``): a ViT whose attention rotates q and k
(2D RoPE) and whose FFN is a SwiGLU (token-wise: it leaves labels alone)."""
import torch.nn as nn

from tlalign_mm.registry import FAMILIES

from . import Description, softmax_to_attn_drop

_EVA02 = 'mmpretrain.models.backbones.vit_eva02.'


@FAMILIES.register_module(_EVA02 + 'AttentionWithRoPE')
def describe_eva02(backbone: nn.Module) -> Description:
    """mmpretrain 1.2.0 ``ViTEVA02``: each ``EVA02EndcoderLayer``'s
    ``AttentionWithRoPE`` computes its softmax inline (of the RoPE'd q and
    k) and gives it to ``attn_drop``, an ``nn.Dropout``; the layer's one
    ``drop_path`` runs on both branches, attention first (as BEiT's). Class
    token, mmcv ``PatchEmbed`` and readout: the ViT's."""
    return softmax_to_attn_drop(backbone, _EVA02 + 'AttentionWithRoPE',
                                'EVA-02')
