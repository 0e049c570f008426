"""``TLAlignClassifier``: an ``ImageClassifier`` trained on aligned labels
(or, for comparison on the same model and recipe, on the CutMix or TransMix
target)."""
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmpretrain.models import ImageClassifier
from mmpretrain.models.backbones import VisionTransformer
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from tlalign_mm.core.transmix import transmix_lambda_from_weighted

from .tlalign_backbone import TLAlignBackbone
from .traced_forward import TracedOutput, traced_forward

_FIELDS = ('mix_pixel_weights', 'mix_targets', 'mix_cls_weights')
TARGETS = ('tlalign', 'transmix', 'cutmix')


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
TRANSMIX_MODES = ('cutmix', 'token_cutmix')


def transmix_applies(data_samples: List[DataSample]) -> torch.Tensor:
    """``(B,)`` bool: samples of a CutMix (or token CutMix) batch, those
    TransMix applies to. Mixup, patch/block-mixed and unmixed samples keep
    the area target."""
    return torch.tensor([
        s.get('mix_mode', None) in TRANSMIX_MODES
        and s.mix_pixel_weights.shape[0] > 1 for s in data_samples
    ])


@MODELS.register_module()
class TLAlignClassifier(ImageClassifier):
    """Image classifier whose training target is the TL-Align label (or,
    with ``target``, the CutMix or TransMix target).

    In training, the mixing record that ``TLAlignDataPreprocessor`` attached
    to each data sample goes to the backbone wrapper, which aligns the token
    labels during the forward pass; the aligned label (expanded from source
    weights to classes) replaces the mixed ``gt_score`` before the head's loss,
    so label smoothing and the rest of the configured loss apply on top.
    ``predict``, ``val`` and ``test`` are ``ImageClassifier``'s, unchanged.

    A config that turns a plain mmpretrain recipe into its TL-Align twin only
    changes the model type and the batch augmentations to their recording
    versions (``TLCutMix``, ``TLMixup``, ...), which sample identically.
    ``target`` then switches the training target on the same model and
    recipe, so one config line compares CutMix, TransMix and TL-Align.

    Args:
        backbone (dict): a ``TLAlignBackbone`` config, or a plain backbone
            config, which is wrapped in ``TLAlignBackbone(**align_cfg)``.
        align_cfg (dict, optional): options of the wrapper when ``backbone``
            is plain (``align_layers``, ``residual_norm``,
            ``follow_drop_path``).
        data_preprocessor (dict, optional): defaults to type
            ``TLAlignDataPreprocessor``, which records how pixels were mixed.
        target (str): the training target of a mixed batch.

            - ``'tlalign'`` (default): the aligned label of what the head
              classifies (TL-Align).
            - ``'transmix'``: TransMix (Chen et al., CVPR 2022) for samples
              mixed by CutMix or token CutMix: each source's
              ``0.5 * lam_area + 0.5 * lam_attn``, ``lam_attn`` its share of
              the class token's last-block attention on the patch tokens
              (:mod:`tlalign_mm.core.transmix`). Mixup and unmixed samples
              keep the area target. Needs a class-token ViT/DeiT.
            - ``'cutmix'``: the mixed target itself, ``mix_cls_weights @
              mix_targets`` (each source's area ratio), no alignment: the
              model trains exactly as an ``ImageClassifier`` with the
              corresponding mmpretrain augmentations.
        **kwargs: as :class:`mmpretrain.models.ImageClassifier`.
    """

    def __init__(self,
                 backbone: dict,
                 *args,
                 align_cfg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None,
                 target: str = 'tlalign',
                 **kwargs):
        if target not in TARGETS:
            raise ValueError(
                f'TLAlignClassifier target must be one of {TARGETS}, got '
                f'{target!r}.')
        if backbone.get('type') in ('TLAlignBackbone', TLAlignBackbone):
            if align_cfg:
                raise ValueError('Give align_cfg or a TLAlignBackbone config '
                                 'with its options, not both.')
        else:
            backbone = dict(
                type='TLAlignBackbone', backbone=backbone, **(align_cfg or {}))
        if isinstance(data_preprocessor, dict) or data_preprocessor is None:
            data_preprocessor = dict(data_preprocessor or {})
            data_preprocessor.setdefault('type', 'TLAlignDataPreprocessor')
        super().__init__(
            backbone, *args, data_preprocessor=data_preprocessor, **kwargs)
        self.target = target
        if target == 'transmix':
            check_transmix_backbone(self.backbone.backbone)

    def loss(self, inputs: torch.Tensor,
             data_samples: List[DataSample]) -> dict:
        if self.target == 'cutmix':
            # The mixed gt_score the data preprocessor set is the area
            # target (mix_cls_weights @ mix_targets): ImageClassifier's loss.
            return super().loss(inputs, data_samples)
        missing = [f for f in _FIELDS if f not in data_samples[0]]
        if missing:
            raise ValueError(
                f'TLAlignClassifier needs the mixing record {missing} on its '
                'data samples. Use data_preprocessor=dict(type='
                "'TLAlignDataPreprocessor', batch_augments=dict(augments="
                "[dict(type='TLCutMix', alpha=1.0), ...])).")
        pixel_weights = torch.stack(
            [s.mix_pixel_weights for s in data_samples])
        targets = torch.stack([s.mix_targets for s in data_samples]).float()
        cls_weights = torch.stack([s.mix_cls_weights for s in data_samples])
        num_classes = getattr(self.head, 'num_classes', targets.shape[-1])
        if targets.shape[-1] != num_classes:
            raise ValueError(
                f'The mixing targets have {targets.shape[-1]} classes but the '
                f'head has num_classes={num_classes}: set the same '
                'num_classes in data_preprocessor and head.')

        if self.target == 'transmix':
            traced = transmix_forward(self.backbone.backbone, inputs,
                                      pixel_weights)
            cls_weights = cls_weights.float()
            lam = transmix_lambda_from_weighted(traced.weights, cls_weights)
            # Mixup and unmixed samples keep the area ratio.
            applies = transmix_applies(data_samples).to(lam.device)
            lam = torch.where(applies[:, None], lam, cls_weights)
            traced = traced._replace(weights=lam)
        else:
            traced = self.backbone.forward_aligned(inputs, pixel_weights,
                                                   cls_weights)
        feats = self.neck(traced.feats) if self.with_neck else traced.feats
        for sample, score in zip(data_samples, traced.expand(targets)):
            sample.set_gt_score(score)
        return self.head.loss(feats, data_samples)
