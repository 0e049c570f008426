"""TransMix's target (Chen et al., CVPR 2022), for S sources.

TransMix re-weights the area ratio of a CutMix-style mix with the class
token's attention in the last block. The authors' code (``Beckschen/TransMix``
at commit 0e4d31e, ``transmix.py``, ``Mixup_transmix.transmix_label``; the
attention is its ``timm/models/vision_transformer.py``'s
``mean(attn[:, :, 0, 1:], dim=1)``):

- ``a_p``: the last block's softmax attention (before attention dropout) of
  the class-token query to patch token ``p``, averaged over heads. The softmax
  runs over all keys, class token included; only the patch columns are kept.
- ``m_p``: the pasted box's pixel mask downsampled to the token grid by
  ``nn.Upsample(size=n)`` (mode ``'nearest'``): a patch is in the box exactly
  when its top-left pixel is (for image sizes that are multiples of the
  patch size, which TransMix assumes).
- ``lam_attn = sum_p a_p m_p / sum_p a_p``: the attention share of the box,
  renormalised over the patch tokens (the class key's share drops out).
- ``lam_area``: the clipped box's area over the image area.
- ``lam = (lam_area + lam_attn) / 2`` is the pasted image's weight.

For S sources, ``m_p`` becomes each patch token's *source weights*
``y_p in R^S`` and ``lam_attn[s] = sum_p a_p y_p[s] / sum_p a_p``. Two token
masks (:data:`TOKEN_MASKS`):

- ``'nearest'`` (the official definition): ``y_p`` is the pixel weights at
  the patch's top-left pixel (:func:`nearest_pixel_weights`), and
  ``lam_area`` the pixel share of each source.
- ``'fractional'``: ``y_p`` is the mean pixel weight over the patch (the
  initial token labels), so a patch a pixel box cuts through counts by
  the share of it inside the box; ``lam_area`` is the record's
  ``area_share``. Not TransMix's; kept as a named option (it was this
  package's rule before).

The two agree whenever the box follows patch borders (token CutMix); on
TransMix's own pixel CutMix boxes they differ by up to a few hundredths of
the target.
"""
from typing import Tuple

import torch

#: Weight of the attention ratio; TransMix averages it with the area ratio.
ATTENTION_RATIO = 0.5
#: How a patch token's source weights come from the pixel weights.
TOKEN_MASKS = ('nearest', 'fractional')


def nearest_pixel_weights(pixel_weights: torch.Tensor,
                          patch_size: Tuple[int, int]) -> torch.Tensor:
    """Pixel weights made constant over each patch, at the value of the
    patch's top-left pixel: TransMix's nearest-downsampled token mask, in
    pixels, so that any patch's mean weight is its token's mask value.

    Patches are ``ph x pw`` cells from the top-left corner; a partial last
    row / column (image size not a multiple of the patch size) takes the
    value of its own top-left pixel. For sizes that are multiples,
    ``result[..., ::ph, ::pw]`` is exactly
    ``nn.Upsample(size=(H // ph, W // pw))(pixel_weights)`` (mode
    ``'nearest'``), TransMix's mask.

    Args:
        pixel_weights (Tensor): ``(B, S, H, W)``.
        patch_size (tuple): ``(ph, pw)`` in pixels.

    Returns:
        Tensor: ``(B, S, H, W)``, same dtype.
    """
    ph, pw = int(patch_size[0]), int(patch_size[1])
    H, W = pixel_weights.shape[-2:]
    corners = pixel_weights[..., ::ph, ::pw]
    cells = corners.repeat_interleave(ph, -2).repeat_interleave(pw, -1)
    return cells[..., :H, :W]


def attention_lambda(weighted: torch.Tensor,
                     area_share: torch.Tensor) -> torch.Tensor:
    """Each source's share of the class token's patch attention.

    Args:
        weighted (Tensor): ``(B, S)`` ``sum_p a_p y_p``: the patch labels
            weighted by the (unnormalised) class-token attention.
        area_share (Tensor): ``(B, S)`` area ratios; the answer for a sample
            whose attention on patch tokens underflowed to 0.

    Returns:
        Tensor: ``(B, S)`` ``weighted / weighted.sum(-1)``, summing to 1 (the
        patch labels sum to 1 over sources, so the sum is ``sum_p a_p``).
    """
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
    """TransMix's mixing ratio of each source.

    Args:
        cls_attention (Tensor): ``(B, N)`` the last block's head-averaged
            attention of the class token to the ``N`` patch tokens (any
            normalisation: only the ratios between patches matter).
        patch_labels (Tensor): ``(B, N, S)`` each patch token's source
            weights (summing to 1 over ``S``).
        area_share (Tensor): ``(B, S)`` the area ratio of each source (the
            CutMix target's ``lam``).
        ratio (float): weight of the attention ratio. Defaults to 0.5, as in
            TransMix.

    Returns:
        Tensor: ``(B, S)`` ``0.5 * lam_area + 0.5 * lam_attn`` with
        ``lam_attn = sum_p a_p y_p / sum_p a_p``; sums to 1.
    """
    if cls_attention.dim() != 2 or patch_labels.dim() != 3 or \
            patch_labels.shape[:2] != cls_attention.shape:
        raise ValueError(
            f'cls_attention must be (B, N) and patch_labels (B, N, S); got '
            f'{tuple(cls_attention.shape)} and {tuple(patch_labels.shape)}.')
    weighted = torch.einsum('bn,bns->bs', cls_attention.float(),
                            patch_labels.float())
    return transmix_lambda_from_weighted(weighted, area_share, ratio)
