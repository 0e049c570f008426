"""``TLAlignClassifier``: an ``ImageClassifier`` trained on aligned labels."""
from typing import List

import torch
from mmpretrain.models import ImageClassifier
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from .tlalign_backbone import TLAlignBackbone

_FIELDS = ('mix_pixel_weights', 'mix_targets', 'mix_cls_weights')


@MODELS.register_module()
class TLAlignClassifier(ImageClassifier):
    """Image classifier whose training target is the TL-Align label.

    In training, the mixing record that ``TLAlignDataPreprocessor`` attached
    to each data sample goes to the backbone wrapper, which aligns the token
    labels during the forward pass; the aligned label (expanded from source
    weights to classes) replaces the mixed ``gt_score`` before the head's loss,
    so label smoothing and the rest of the configured loss apply on top.
    ``predict``, ``val`` and ``test`` are ``ImageClassifier``'s, unchanged.

    Args:
        backbone (dict): a ``TLAlignBackbone`` config (a supported plain
            backbone is wrapped with default options).
        **kwargs: as :class:`mmpretrain.models.ImageClassifier`.
    """

    def __init__(self, backbone: dict, *args, **kwargs):
        if backbone.get('type') not in ('TLAlignBackbone', TLAlignBackbone):
            backbone = dict(type='TLAlignBackbone', backbone=backbone)
        super().__init__(backbone, *args, **kwargs)

    def loss(self, inputs: torch.Tensor,
             data_samples: List[DataSample]) -> dict:
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

        traced = self.backbone.forward_aligned(inputs, pixel_weights,
                                               cls_weights)
        feats = self.neck(traced.feats) if self.with_neck else traced.feats
        aligned = traced.expand(targets)
        for sample, score in zip(data_samples, aligned):
            sample.set_gt_score(score)
        return self.head.loss(feats, data_samples)
