"""TransMix (Chen et al., CVPR 2022), ``TLAlignClassifier(target=
'transmix')``: the class token's last-block attention over the patch labels,
from the backbone's own forward, into :mod:`tlalign_mm.core.transmix`."""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmpretrain.models.backbones import VisionTransformer

from tlalign_mm.core import AlignOptions, MixRecord
from tlalign_mm.core.transmix import (
    TOKEN_MASKS,
    nearest_pixel_weights,
    transmix_lambda_from_weighted,
)

from .aligned_forward import AlignedOutput, aligned_forward
from .families import describe
from .taps import Recording


def takes_transmix(backbone: nn.Module) -> bool:
    """TransMix reads the class token's attention: it needs a class-token
    ViT/DeiT that classifies from its class token."""
    return isinstance(backbone, VisionTransformer) and \
        getattr(backbone, 'out_type', None) == 'cls_token'


def check_transmix_backbone(backbone: nn.Module) -> None:
    """A clear error unless :func:`takes_transmix`."""
    if not takes_transmix(backbone):
        kind = type(backbone).__name__ + (
            f" (out_type={backbone.out_type!r})"
            if isinstance(backbone, VisionTransformer) else '')
        raise ValueError(
            "target='transmix' re-weights the mix with the class token's "
            'last-block attention, so it needs a VisionTransformer (ViT/DeiT) '
            f"with out_type='cls_token'; got {kind}. Use target='tlalign' "
            "or 'cutmix' for models without a class token.")


def check_transmix_cfg(transmix_cfg: dict) -> dict:
    """``TLAlignClassifier(transmix_cfg=...)`` checked: ``mask``, one of
    :data:`~tlalign_mm.core.transmix.TOKEN_MASKS` (default ``'nearest'``)."""
    cfg = dict(transmix_cfg or {})
    unknown = set(cfg) - {'mask'}
    if unknown:
        raise ValueError(f'Unknown transmix_cfg keys {sorted(unknown)}; '
                         "the only option is `mask`.")
    cfg.setdefault('mask', 'nearest')
    if cfg['mask'] not in TOKEN_MASKS:
        raise ValueError(f"transmix_cfg mask must be one of {TOKEN_MASKS}, "
                         f"got {cfg['mask']!r}.")
    return cfg


#: TransMix's weights by the rule's own loop: the last block's attention
#: alone, ``Y <- Ā Y``, drop-path ignored (see :func:`transmix_forward`).
_TRANSMIX_RULE = AlignOptions(align_layers='last', residual_norm=False,
                              follow_drop_path=False)


def transmix_forward(backbone: nn.Module, images: torch.Tensor,
                     pixel_weights: torch.Tensor,
                     recording: Optional[Recording] = None
                     ) -> AlignedOutput:
    """The backbone's forward and, as ``weights``, ``sum_p a_p y_p`` ``(B,
    S)``: the patch tokens' source weights ``y_p`` weighted by the class
    token's last-block attention ``a_p`` (softmax before dropout, head mean;
    not normalised).

    Exact, by the rule's own loop: the labels get one extra source that only
    the extra tokens hold, and only the last block moves labels, by ``Y <- Ā
    Y`` regardless of drop-path; the class token's label is then ``[sum_p
    a_p y_p | a_cls]``.
    """
    check_transmix_backbone(backbone)
    B, S = pixel_weights.shape[:2]
    # One more source, held by no pixel: (B, S + 1, H, W).
    pixel_weights = F.pad(pixel_weights.detach().float(), (0, 0, 0, 0, 0, 1))
    own = F.one_hot(torch.full((B, ), S, device=pixel_weights.device),
                    S + 1).float()
    aligned = aligned_forward(backbone, images, pixel_weights, own,
                              _TRANSMIX_RULE, recording=recording)
    return aligned._replace(weights=aligned.weights[:, :S])


#: The record modes TransMix is defined for.
TRANSMIX_MODES = ('cutmix', 'tokencutmix')


def transmix_applies(mix: MixRecord) -> bool:
    """A batch mixed by CutMix or token CutMix (others keep the area
    target)."""
    return mix.mode in TRANSMIX_MODES and mix.num_sources > 1


def transmix_target(backbone: nn.Module, images: torch.Tensor,
                    mix: MixRecord, mask: str = 'nearest',
                    recording: Optional[Recording] = None) -> AlignedOutput:
    """The backbone's forward and, as ``weights``, TransMix's ``(B, S)``
    ``lam = (lam_area + lam_attn) / 2`` (:mod:`tlalign_mm.core.transmix`)
    for a CutMix or token CutMix batch (others keep ``mix.area_share``).

    ``mask``: ``'nearest'`` (TransMix's: a patch is in the box when its
    top-left pixel is; ``lam_area`` the pixel share) or ``'fractional'``
    (each patch by the share of its pixels; ``lam_area`` is
    ``mix.area_share``). ``recording``: as :func:`.aligned_forward`'s.
    """
    check_transmix_cfg(dict(mask=mask))
    area_share = mix.area_share.float()
    pixel_weights = mix.pixel_weights.detach().float()
    if mask == 'nearest':
        size = (describe(backbone) if recording is None
                else recording.description).token_size
        if size is None:
            raise ValueError(
                "TransMix's nearest token mask needs the token size of "
                f'{type(backbone).__name__}, which its description does not '
                "state; use transmix_cfg=dict(mask='fractional').")
        # the clipped box's area (TransMix's lam0), not the token mask's
        area = pixel_weights.mean((2, 3))
        pixel_weights = nearest_pixel_weights(pixel_weights, size)
    else:
        area = area_share
    aligned = transmix_forward(backbone, images, pixel_weights, recording)
    if not transmix_applies(mix):
        return aligned._replace(weights=area_share)
    return aligned._replace(
        weights=transmix_lambda_from_weighted(aligned.weights, area))
