"""XCiT: cross-covariance attention (across channels: labels stay), local
patch interaction (a convolution branch), class attention (only the class
token queries; docs/design.md, "Pooled and subset queries")."""
import torch.nn as nn

from tlalign_mm.core import QuerySubset
from tlalign_mm.registry import FAMILIES, TOKEN_RULES

from ..token_rules import conv_branch_labels
from . import Description, Tap, part

_XCIT = 'mmpretrain.models.backbones.xcit.'

# The embedding's 3x3 stride-2 convs, and LPI's two 3x3 depth-wise convs (a
# residual branch): each conv's window mean in turn (rule 2, composed).
TOKEN_RULES.register_module([_XCIT + 'ConvPatchEmbed', _XCIT + 'LPI'],
                            module=conv_branch_labels)


@FAMILIES.register_module(_XCIT + 'XCiT')
def describe_xcit(backbone: nn.Module) -> Description:
    """mmpretrain 1.2.0's ``XCiT`` (``backbones/xcit.py``): ``xca_layers``,
    whose XCA mixes each token's own channels and whose ``local_mp`` (LPI)
    is a residual branch of convolutions, its drop-path the block's one
    ``drop_path``'s second call; then the class token joins (at the area
    share) before ``ca_layers``, whose ``ClassAttntion`` queries with the
    class token only (its softmax given to ``attn_drop``), the patch tokens
    passing token-wise; ``drop_path`` runs on the attention branch first.
    The head reads the last layer's class token or patch mean."""
    xca, ca = list(part(backbone, 'xca_layers', 'XCiT')), list(
        part(backbone, 'ca_layers', 'XCiT'))
    last = len(xca) + len(ca) - 1
    if not ca or max(backbone.out_indices) != last or \
            backbone.out_type not in ('cls_token', 'avg_featmap'):
        raise NotImplementedError(
            'TL-Align labels the class-attention layers of XCiT, the last '
            f'one read by the head: use cls_attn_layers > 0, out_indices='
            f"(-1, ) and out_type='cls_token' or 'avg_featmap' (got "
            f'{len(ca)}, {backbone.out_indices}, {backbone.out_type!r}).')
    taps = []
    for i, layer in enumerate(xca):
        taps += [Tap(i, layer.local_mp, 'branch'),
                 Tap(i, layer.drop_path, 'branch_keep')]
    for i, layer in enumerate(ca, len(xca)):
        taps += [Tap(i, layer.attn.attn_drop, 'attn_drop_input'),
                 Tap(i, layer.attn, 'fixed_key_map', QuerySubset(1)),
                 Tap(i, layer.drop_path, 'keep')]
    embed = part(backbone, 'patch_embed', 'XCiT')
    readout = (0, 1) if backbone.out_type == 'cls_token' else (1, None)
    return Description(xca + ca, taps, embed, 1, None, readout,
                       (embed.patch_size, ) * 2, extra_from=len(xca))
