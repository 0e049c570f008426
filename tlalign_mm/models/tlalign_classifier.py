"""``TLAlignClassifier``: an ``ImageClassifier`` trained on aligned labels."""
from typing import List, Optional

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

    A config that turns a plain mmpretrain recipe into its TL-Align twin only
    changes the model type and the batch augmentations to their recording
    versions (``TLCutMix``, ``TLMixup``, ...), which sample identically.

    Args:
        backbone (dict): a ``TLAlignBackbone`` config, or a plain backbone
            config, which is wrapped in ``TLAlignBackbone(**align_cfg)``.
        align_cfg (dict, optional): options of the wrapper when ``backbone``
            is plain (``align_layers``, ``residual_norm``,
            ``follow_drop_path``).
        data_preprocessor (dict, optional): defaults to type
            ``TLAlignDataPreprocessor``, which records how pixels were mixed.
        **kwargs: as :class:`mmpretrain.models.ImageClassifier`.
    """

    def __init__(self,
                 backbone: dict,
                 *args,
                 align_cfg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None,
                 **kwargs):
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
