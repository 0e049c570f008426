"""TransMix (Chen et al., CVPR 2022) on the tracer's machinery: the target
mode ``TLAlignClassifier(target='transmix')``.

The ratio itself (pure torch) is :mod:`tlalign_mm.core.transmix`; this module
gets its input, the class token's last-block attention over the patch
labels, from the backbone's own forward.
"""
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmpretrain.models.backbones import VisionTransformer
from mmpretrain.structures import DataSample

from .traced_forward import TracedOutput, traced_forward


def check_transmix_backbone(backbone: nn.Module) -> None:
    """TransMix reads the class token's attention: it needs a class-token
    ViT/DeiT that classifies from its class token."""
    if not isinstance(backbone, VisionTransformer) or \
            getattr(backbone, 'out_type', None) != 'cls_token':
        kind = type(backbone).__name__ + (
            f" (out_type={backbone.out_type!r})"
            if isinstance(backbone, VisionTransformer) else '')
        raise ValueError(
            "target='transmix' re-weights the mix with the class token's "
            'last-block attention, so it needs a VisionTransformer (ViT/DeiT) '
            f"with out_type='cls_token'; got {kind}. Use target='tlalign' "
            "or 'cutmix' for models without a class token.")


def transmix_forward(backbone: nn.Module, images: torch.Tensor,
                     pixel_weights: torch.Tensor) -> TracedOutput:
    """The backbone's forward plus ``sum_p a_p y_p``, ``(B, S)``: the patch
    tokens' source weights ``y_p`` weighted by the class token's last-block
    attention ``a_p`` (softmax before dropout, averaged over heads).

    Exact and in the same forward, with the tracer's own machinery: the
    labels get one extra source that only the class (and distillation)
    token holds (no pixel has it), and only the last block moves labels,
    without the residual average (``Y <- Ā Y``) and regardless of drop-path.
    The class token's label after the last block is then
    ``[sum_p a_p y_p | a_cls]`` (``a_cls``: its attention on the extra
    tokens), so its first ``S`` channels are what TransMix needs.

    Args:
        backbone (nn.Module): a plain ``VisionTransformer`` (out_type
            ``'cls_token'``).
        images (Tensor): ``(B, 3, H, W)`` mixed images.
        pixel_weights (Tensor): ``(B, S, H, W)``.

    Returns:
        TracedOutput: ``feats`` as the backbone's forward; ``weights`` the
        ``(B, S)`` attention-weighted patch labels (not normalised).
    """
    check_transmix_backbone(backbone)
    B, S = pixel_weights.shape[:2]
    # One more source, held by no pixel: (B, S + 1, H, W).
    pixel_weights = F.pad(pixel_weights.detach().float(), (0, 0, 0, 0, 0, 1))
    own = F.one_hot(torch.full((B, ), S, device=pixel_weights.device),
                    S + 1).float()
    traced = traced_forward(backbone, images, pixel_weights, own,
                            align_layers='last', residual_norm=False,
                            follow_drop_path=False)
    return traced._replace(weights=traced.weights[:, :S])


# The mixes TransMix is defined for (record modes of the TL* augments).
TRANSMIX_MODES = ('cutmix', 'tokencutmix')


def transmix_applies(data_samples: List[DataSample]) -> torch.Tensor:
    """``(B,)`` bool: samples of a CutMix (or token CutMix) batch, those
    TransMix applies to. Mixup, patch/block-mixed and unmixed samples keep
    the area target."""
    return torch.tensor([
        s.get('mix_mode', None) in TRANSMIX_MODES
        and s.mix_pixel_weights.shape[0] > 1 for s in data_samples
    ])
