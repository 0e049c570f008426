"""``TLAlignClassifier``: an ``ImageClassifier`` trained on aligned labels
(or, for comparison on the same model and recipe, on the CutMix or TransMix
target)."""
from typing import List, Optional

import torch
from mmpretrain.models import ImageClassifier
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from tlalign_mm.core.transmix import transmix_lambda_from_weighted

from .tlalign_backbone import TLAlignBackbone
from .transmix import (
    check_transmix_backbone,
    transmix_applies,
    transmix_forward,
)

_FIELDS = ('mix_pixel_weights', 'mix_targets', 'mix_cls_weights')
TARGETS = ('tlalign', 'transmix', 'cutmix')


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

    Attributes:
        last_label_weights (tuple[Tensor, Tensor]): after a training step
            with the ``'tlalign'`` or ``'transmix'`` target, that batch's
            target and area (CutMix) label as ``(B, S)`` source weights,
            detached, on the model's device.
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
        # The batch's (aligned, area) (B, S) source weights, detached and
        # left on the device, for monitoring (LabelDriftHook).
        self.last_label_weights = (traced.weights.detach(),
                                   cls_weights.detach())
        feats = self.neck(traced.feats) if self.with_neck else traced.feats
        for sample, score in zip(data_samples, traced.expand(targets)):
            sample.set_gt_score(score)
        return self.head.loss(feats, data_samples)
