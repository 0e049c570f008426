"""Label maps of a two-source mix (the paper's Fig. 5): each spatial token's
label drawn at its place, red for source 0 (image 1), blue for source 1
(image 2), purple in between."""
import math
from typing import NamedTuple, Tuple

import torch
import torch.nn as nn

from tlalign_mm.core.token_labels import label_map_of
from tlalign_mm.models.families import describe

from .label_rmse import aligned_source_weights


def token_grid(num_tokens: int, image_hw: Tuple[int, int]) -> Tuple[int, int]:
    """``(h, w)`` with ``h * w = num_tokens`` closest to the image's aspect
    ratio (a patch grid, or its 2x2 merges)."""
    H, W = image_hw
    grids = [(num_tokens // w, w) for w in range(1, num_tokens + 1)
             if num_tokens % w == 0]
    return min(grids, key=lambda g: abs(math.log(g[1] * H / (g[0] * W))))


def label_colours(weights: torch.Tensor) -> torch.Tensor:
    """``(B, 2, h, w)`` source weights -> ``(B, h, w, 3)`` RGB in [0, 1]:
    ``w0 * red + w1 * blue``."""
    w = weights.clamp(0, 1)
    return torch.stack([w[:, 0], torch.zeros_like(w[:, 0]), w[:, 1]], -1)


class LabelMaps(NamedTuple):
    """The token labels before the first block (``initial``, ``(B, 2, h,
    w)``) and after the last (``aligned``, ``(B, 2, h', w')``, Swin: on the
    last stage's grid); the aligned label of what the model classifies
    (``readout``, ``(B, 2)``); the CutMix label (``area``, ``(B, 2)``)."""
    initial: torch.Tensor
    aligned: torch.Tensor
    readout: torch.Tensor
    area: torch.Tensor


@torch.no_grad()
def label_maps(model: nn.Module, batch) -> LabelMaps:
    """The label maps of a two-source :class:`~.mixed_batches.MixedBatch`
    by the model's own rule (:func:`.aligned_source_weights`)."""
    record = batch.record
    if record.num_sources != 2:
        raise ValueError('Label maps show two sources; mix the batch.')
    readout, history = aligned_source_weights(model, batch.mixed, record,
                                              return_token_labels=True)
    hw = tuple(batch.mixed.shape[-2:])
    description = describe(model.backbone)
    extra = description.extra_tokens
    # (T2T-ViT's and XCiT's class token join after the first tokens)
    initial, aligned = (label_map_of(y[:, e:], token_grid(
        y.shape[1] - e, hw)) for y, e in (
            (history[0], 0 if description.extra_from else extra),
            (history[-1], extra)))
    return LabelMaps(initial, aligned, readout, record.area_share.float())


def display_images(data_preprocessor, images: torch.Tensor) -> torch.Tensor:
    """``(B, 3, H, W)`` preprocessed images -> ``(B, H, W, 3)`` RGB in
    [0, 1]: undo the normalisation, and show BGR (what mmcv loads, when the
    preprocessor did not convert it) as RGB."""
    x = images.detach().float()
    if getattr(data_preprocessor, '_enable_normalize', False):
        x = x * data_preprocessor.std + data_preprocessor.mean
    x = (x / 255).clamp(0, 1)
    converted = getattr(data_preprocessor, 'to_rgb', None)
    if converted is None:
        converted = getattr(data_preprocessor, '_channel_conversion', False)
    if x.shape[1] == 3 and not converted:
        x = x.flip(1)
    return x.permute(0, 2, 3, 1).cpu()
