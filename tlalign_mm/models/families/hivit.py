"""HiViT (mmpretrain ``HiViT``): an MLP-only stem on 4x4 inner patches of
each 16x16 patch, merged twice inside the patch, then attention blocks on
the 16x16 patch tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from tlalign_mm.core import flatten_label_map, window_mean
from tlalign_mm.registry import FAMILIES, TOKEN_RULES

from ..token_rules import is_a
from . import Description, Tap

_HIVIT = 'mmpretrain.models.backbones.hivit.'


@TOKEN_RULES.register_module(_HIVIT + 'PatchEmbed')
def hivit_embed_labels(embed: nn.Module,
                       label_map: torch.Tensor) -> torch.Tensor:
    """HiViT's ``PatchEmbed`` cuts ``inner_patches``-square inner tokens of
    each patch (its ``proj`` conv's windows: their mean, padding carrying
    no mass); the stem's blocks act on each token alone and its
    ``PatchMerge``s merge 2x2 inner tokens inside a patch (mmpretrain
    1.2.0, ``hivit.py``), so the first attention's token, a patch, gets the
    mean of its inner tokens' labels (docs/design.md, "What a token rule
    may assume"). ``(B, S, H, W) -> (B, Hp*Wp, S)``."""
    proj = embed.proj
    inner = window_mean(label_map, proj.kernel_size, proj.stride,
                        proj.padding, proj.dilation)
    return flatten_label_map(F.avg_pool2d(inner, embed.inner_patches))


@FAMILIES.register_module(_HIVIT + 'HiViT')
def describe_hivit(backbone: nn.Module) -> Description:
    """mmpretrain 1.2.0 ``HiViT``: the main stage, the last
    ``num_main_blocks`` of ``blocks``, attends through ``attn.softmax`` (an
    ``nn.Softmax``; relative position bias included, before dropout); a
    block's one ``drop_path`` runs on both branches, attention first. No
    extra tokens; the head reads the mean token of the last block (its
    last output: ``out_indices`` ends with it). Tokens are 16 px
    (``patch_size``), the embedding conv's stride is 4."""
    blocks, taps = list(backbone.blocks)[-backbone.num_main_blocks:], []
    for i, block in enumerate(blocks):
        attn = getattr(block, 'attn', None)
        if not is_a(attn, _HIVIT + 'Attention') or not isinstance(
                getattr(attn, 'softmax', None), nn.Softmax):
            raise NotImplementedError(
                "TL-Align records HiViT's main blocks with mmpretrain's "
                f'hivit Attention (an nn.Softmax); main block {i} is a '
                f'{type(block).__name__} with {type(attn).__name__}.')
        taps += [Tap(i, attn.softmax, 'softmax'),
                 Tap(i, block.drop_path, 'keep')]
    last = len(blocks) - 1
    if last not in backbone.out_indices:  # mmpretrain's shared default list
        raise ValueError(
            f"TL-Align labels HiViT's last block ({last}), but out_indices="
            f'{backbone.out_indices} does not output it: mmpretrain 1.2.0 '
            "shares HiViT's default out_indices between models and sets it "
            f'to the depth of the last one built. Pass out_indices=[{last}].')
    patch = backbone.patch_embed.patch_size
    return Description(blocks, taps, backbone.patch_embed, 0, None, (0, None),
                       (int(patch[0]), int(patch[1])))
