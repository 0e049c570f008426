"""Layer-wise mixing ratio of the token the model classifies (the paper's
Fig. 4): what the features say against what each target assumes.

For a mixed image of sources ``a`` and ``b`` and the two unmixed images, the
readout token after block ``l`` (the class token; the mean token of pooled
models) is ``z``, ``z_a``, ``z_b``. Its *similarity ratio* of source ``a`` is

    r_a = max(cos(z, z_a), 0) / (max(cos(z, z_a), 0) + max(cos(z, z_b), 0))

(0.5 when both cosines are <= 0), compared block by block with CutMix's area
ratio ``lambda`` (the same at every block), TransMix's ``(lambda +
lambda_attn) / 2`` from the last block's class attention (class-token ViTs,
the model's ``transmix_cfg``; one value) and the readout token's TL-Align
label after block ``l`` (the model's ``align_cfg``). All are the share of
source 0 (the image the box is pasted into).
"""
from typing import Dict, List

import torch
import torch.nn as nn

from tlalign_mm.core import readout
from tlalign_mm.models.aligned_forward import aligned_forward
from tlalign_mm.models.families import describe
from tlalign_mm.models.transmix import (
    check_transmix_cfg,
    takes_transmix,
    transmix_target,
)


@torch.no_grad()
def block_readouts(backbone: nn.Module, images: torch.Tensor
                   ) -> List[torch.Tensor]:
    """``[(B, D)] * L``: the readout token (the family description's) after
    every block."""
    description = describe(backbone)
    outputs = []

    def hook(module, args, out):
        out = out[0] if isinstance(out, tuple) else out
        outputs.append(readout(out, description.readout))

    handles = [b.register_forward_hook(hook) for b in description.blocks]
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


@torch.no_grad()
def mixing_ratios(model: nn.Module, batch) -> Dict[str, torch.Tensor]:
    """Per-image, per-block source-0 ratios of one two-source
    :class:`~.mixed_batches.MixedBatch` by ``model`` (the classifier; its
    ``align_cfg`` and ``transmix_cfg``, the defaults without them).

    Returns:
        dict: ``similarity`` and ``tlalign`` ``(B, L)``; ``cutmix`` ``(B,)``;
        ``transmix`` ``(B,)`` (class-token ViTs only).
    """
    record = batch.record
    if record.num_sources != 2:
        raise ValueError('The mixing ratio compares two sources; mix the '
                         "batch with 'cutmix', 'mixup' or 'resizemix'.")
    backbone = model.backbone
    mixed = block_readouts(backbone, batch.mixed)
    a = block_readouts(backbone, batch.source_images(0))
    b = block_readouts(backbone, batch.source_images(1))
    similarity = torch.stack(
        [similarity_ratio(m, x, y) for m, x, y in zip(mixed, a, b)], 1)
    history = aligned_forward(
        backbone, batch.mixed, record.pixel_weights, record.area_share,
        getattr(model, 'align_cfg', None),
        keep_history=True).history
    head = describe(backbone).readout
    tlalign = torch.stack([readout(y, head)[:, 0] for y in history[1:]], 1)
    out = dict(similarity=similarity, tlalign=tlalign,
               cutmix=record.area_share[:, 0].float())
    if takes_transmix(backbone):
        out['transmix'] = transmix_target(
            backbone, batch.mixed, record,
            **check_transmix_cfg(getattr(model, 'transmix_cfg', None))
        ).weights[:, 0]
    return out
