"""Layer-wise mixing ratio of the token the model classifies (the paper's
Fig. 4): what the features say against what each target assumes.

For a mixed image of sources ``a`` and ``b`` and the two unmixed images, the
readout token after block ``l`` (the class token; the mean token of pooled
models) is ``z``, ``z_a``, ``z_b``. Its *similarity ratio* of source ``a`` is

    r_a = max(cos(z, z_a), 0) / (max(cos(z, z_a), 0) + max(cos(z, z_b), 0))

(``r_b = 1 - r_a``; 0.5 when both cosines are <= 0). It is compared, block
by block, with

- CutMix: the area ratio ``lambda``, the same at every block;
- TransMix: ``(lambda + lambda_attn) / 2`` from the last block's class
  attention (class-token ViTs only), one value;
- TL-Align: the readout token's aligned label after block ``l``, from
  :func:`tlalign_mm.align_labels` (``return_token_labels=True``).

All ratios are the share of source 0 (the image the box is pasted into).
"""
from typing import Dict, List

import torch
import torch.nn as nn

from tlalign_mm.core.transmix import transmix_lambda_from_weighted
from tlalign_mm.models.recorders import ViTRecorder, get_recorder
from tlalign_mm.models.transmix import transmix_forward

from .label_rmse import aligned_source_weights


def transformer_blocks(backbone: nn.Module) -> List[nn.Module]:
    """The blocks whose outputs are the per-layer tokens, in order (the
    recorder's blocks)."""
    return [block.block for block in get_recorder(backbone).blocks(backbone)]


def readout_tokens(backbone: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """``(B, N, D)`` -> ``(B, D)``: the token the head classifies (class
    token) or, for pooled models, the mean token (the recorder's readout).
    Works for features and for token labels alike."""
    return get_recorder(backbone).readout(backbone, tokens)


@torch.no_grad()
def block_readouts(backbone: nn.Module, images: torch.Tensor
                   ) -> List[torch.Tensor]:
    """``[(B, D)] * L``: the readout token after every block."""
    outputs = []
    handles = [
        block.register_forward_hook(
            lambda m, args, out: outputs.append(
                readout_tokens(backbone, out[0] if isinstance(out, tuple)
                               else out)))
        for block in transformer_blocks(backbone)
    ]
    try:
        backbone(images)
    finally:
        for handle in handles:
            handle.remove()
    return outputs


def similarity_ratio(mixed: torch.Tensor, a: torch.Tensor,
                     b: torch.Tensor) -> torch.Tensor:
    """``(B, D)`` tokens -> ``(B,)`` source ``a``'s share by cosine
    similarity (see the module doc)."""
    ca = torch.cosine_similarity(mixed.float(), a.float(), -1).clamp_min(0)
    cb = torch.cosine_similarity(mixed.float(), b.float(), -1).clamp_min(0)
    total = ca + cb
    return torch.where(total > 0, ca / total.clamp_min(1e-12),
                       torch.full_like(total, 0.5))


def has_class_attention(backbone: nn.Module) -> bool:
    return isinstance(get_recorder(backbone), ViTRecorder) and \
        getattr(backbone, 'out_type', None) == 'cls_token'


@torch.no_grad()
def mixing_ratios(backbone: nn.Module, batch) -> Dict[str, torch.Tensor]:
    """Per-image, per-block source-0 ratios of one two-source batch.

    Args:
        backbone: the model's backbone (its TL-Align options, if it was
            built by ``TLAlignBackbone``, apply).
        batch (MixedBatch): a two-source mixed batch.

    Returns:
        dict: ``similarity`` and ``tlalign`` ``(B, L)``; ``cutmix`` ``(B,)``;
        ``transmix`` ``(B,)`` (class-token ViTs only).
    """
    record = batch.record
    if record.num_sources != 2:
        raise ValueError('The mixing ratio compares two sources; mix the '
                         "batch with 'cutmix', 'mixup' or 'resizemix'.")
    mixed = block_readouts(backbone, batch.mixed)
    a = block_readouts(backbone, batch.source_images(0))
    b = block_readouts(backbone, batch.source_images(1))
    similarity = torch.stack(
        [similarity_ratio(m, x, y) for m, x, y in zip(mixed, a, b)], 1)
    _, history = aligned_source_weights(backbone, batch.mixed,
                                        record.pixel_weights,
                                        record.area_share,
                                        return_token_labels=True)
    tlalign = torch.stack(
        [readout_tokens(backbone, labels)[:, 0] for labels in history[1:]],
        1)
    out = dict(similarity=similarity, tlalign=tlalign,
               cutmix=record.area_share[:, 0].float())
    if has_class_attention(backbone):
        weighted = transmix_forward(backbone, batch.mixed,
                                    record.pixel_weights).weights
        out['transmix'] = transmix_lambda_from_weighted(
            weighted, record.area_share)[:, 0]
    return out
