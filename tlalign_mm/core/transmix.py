"""TransMix's target (Chen et al., CVPR 2022), for S sources.

TransMix re-weights a CutMix-style area ratio with the class token's
last-block attention. The authors' code (``Beckschen/TransMix`` at 0e4d31e,
``transmix.py``, ``Mixup_transmix.transmix_label``; the attention is its
``vision_transformer.py``'s ``mean(attn[:, :, 0, 1:], dim=1)``):

- ``a_p``: the last block's softmax attention (before dropout) of the class
  query to patch ``p``, head mean; softmax over all keys, patch columns kept.
- ``m_p``: the box's pixel mask downsampled to the token grid by
  ``nn.Upsample(size=n)`` (``'nearest'``): a patch is in the box exactly when
  its top-left pixel is (for image sizes that are multiples of the patch).
- ``lam = (lam_area + lam_attn) / 2``, ``lam_attn = sum_p a_p m_p / sum_p
  a_p``, ``lam_area`` the clipped box's area share.

For S sources ``m_p`` becomes each patch's *source weights* ``y_p``. Two
token masks (:data:`TOKEN_MASKS`): ``'nearest'`` (the official: ``y_p`` at
the patch's top-left pixel, :func:`nearest_pixel_weights`; ``lam_area`` the
pixel share) and ``'fractional'`` (``y_p`` the patch's mean pixel weight,
the initial token labels; ``lam_area`` the record's ``area_share``; not
TransMix's, this package's rule before). They agree when the box follows
patch borders (token CutMix); on pixel CutMix boxes they differ by up to a
few hundredths of the target.
"""
from typing import Tuple

import torch

#: Weight of the attention ratio; TransMix averages it with the area ratio.
ATTENTION_RATIO = 0.5
#: How a patch token's source weights come from the pixel weights.
TOKEN_MASKS = ('nearest', 'fractional')


def nearest_pixel_weights(pixel_weights: torch.Tensor,
                          patch_size: Tuple[int, int]) -> torch.Tensor:
    """``(B, S, H, W)`` pixel weights made constant over each ``(ph, pw)``
    patch at its top-left pixel's value (a partial patch: its own top-left
    pixel's): TransMix's nearest-downsampled token mask, in pixels. For
    sizes that are multiples, ``result[..., ::ph, ::pw]`` is exactly
    ``nn.Upsample(size=(H // ph, W // pw))(pixel_weights)``."""
    ph, pw = int(patch_size[0]), int(patch_size[1])
    H, W = pixel_weights.shape[-2:]
    corners = pixel_weights[..., ::ph, ::pw]
    cells = corners.repeat_interleave(ph, -2).repeat_interleave(pw, -1)
    return cells[..., :H, :W]


def attention_lambda(weighted: torch.Tensor,
                     area_share: torch.Tensor) -> torch.Tensor:
    """``lam_attn``: ``weighted / weighted.sum(-1)`` ``(B, S)`` from
    ``weighted = sum_p a_p y_p`` (the sum is ``sum_p a_p``: labels sum to
    1); ``area_share`` for a sample whose patch attention underflowed to
    0."""
    weighted = weighted.float()
    total = weighted.sum(-1, keepdim=True)
    return torch.where(total > 0, weighted / total.clamp_min(1e-30),
                       area_share.to(weighted))


def transmix_lambda_from_weighted(weighted: torch.Tensor,
                                  area_share: torch.Tensor,
                                  ratio: float = ATTENTION_RATIO
                                  ) -> torch.Tensor:
    """TransMix's ``lam = (1 - ratio) * lam_area + ratio * lam_attn`` from
    ``weighted = sum_p a_p y_p`` ``(B, S)``; see :func:`transmix_lambda`."""
    area_share = area_share.float()
    return (1 - ratio) * area_share + ratio * attention_lambda(
        weighted, area_share)


def transmix_lambda(cls_attention: torch.Tensor,
                    patch_labels: torch.Tensor,
                    area_share: torch.Tensor,
                    ratio: float = ATTENTION_RATIO) -> torch.Tensor:
    """TransMix's ``(B, S)`` mixing ratio ``(1 - ratio) * lam_area + ratio
    * lam_attn`` from the class token's ``(B, N)`` head-mean attention to
    the patch tokens (any normalisation), their ``(B, N, S)`` source weights
    and the ``(B, S)`` area ratios."""
    if cls_attention.dim() != 2 or patch_labels.dim() != 3 or \
            patch_labels.shape[:2] != cls_attention.shape:
        raise ValueError(
            f'cls_attention must be (B, N) and patch_labels (B, N, S); got '
            f'{tuple(cls_attention.shape)} and {tuple(patch_labels.shape)}.')
    weighted = torch.einsum('bn,bns->bs', cls_attention.float(),
                            patch_labels.float())
    return transmix_lambda_from_weighted(weighted, area_share, ratio)
