"""``TLAlignClassifier``: an ``ImageClassifier`` trained on aligned labels
(or, for comparison on the same model and recipe, on the CutMix or TransMix
target)."""
from typing import List, Optional

import torch
from mmpretrain.models import ImageClassifier
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from tlalign_mm.mixing.token_cutmix import bind_patch_size

from .tlalign_backbone import tlalign_backbone_cfg
from .traced_forward import traced_forward
from .tracers import get_tracer
from .transmix import (
    check_transmix_backbone,
    check_transmix_cfg,
    transmix_target,
)

_FIELDS = ('mix_pixel_weights', 'mix_targets', 'mix_cls_weights')
TARGETS = ('tlalign', 'transmix', 'cutmix')


@MODELS.register_module()
class TLAlignClassifier(ImageClassifier):
    """Image classifier whose training target is the TL-Align label (or,
    with ``target``, the CutMix or TransMix target).

    In training, the mixing record that ``TLAlignDataPreprocessor`` attached
    to each data sample goes with the images through the backbone's traced
    forward (:func:`~tlalign_mm.models.traced_forward`), which aligns the
    token labels during the forward pass; the aligned label (expanded from
    source weights to classes) replaces the mixed ``gt_score`` before the
    head's loss, so label smoothing and the rest of the configured loss apply
    on top.
    ``predict``, ``val`` and ``test`` are ``ImageClassifier``'s, unchanged.

    A config that turns a plain mmpretrain recipe into its TL-Align twin only
    changes the model type and the batch augmentations to their recording
    versions (``TLCutMix``, ``TLMixup``, ...), which sample identically.
    ``target`` then switches the training target on the same model and
    recipe, so one config line compares CutMix, TransMix and TL-Align.

    Args:
        backbone (dict): a ``TLAlignBackbone`` config, or a plain backbone
            config, which is built as ``TLAlignBackbone(**align_cfg)``.
            Either way ``self.backbone`` is the plain backbone module.
        align_cfg (dict, optional): the alignment options when ``backbone``
            is plain (``align_layers``, ``residual_norm``,
            ``follow_drop_path``; see ``TLAlignBackbone``).
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
        transmix_cfg (dict, optional): ``mask='nearest'`` (default,
            TransMix's own: a patch is in the box when its top-left pixel
            is) or ``'fractional'`` (by the share of its pixels), see
            :func:`~tlalign_mm.models.transmix.transmix_target`.
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
                 transmix_cfg: Optional[dict] = None,
                 **kwargs):
        if target not in TARGETS:
            raise ValueError(
                f'TLAlignClassifier target must be one of {TARGETS}, got '
                f'{target!r}.')
        backbone = tlalign_backbone_cfg(backbone, **(align_cfg or {}))
        if isinstance(data_preprocessor, dict) or data_preprocessor is None:
            data_preprocessor = dict(data_preprocessor or {})
            data_preprocessor.setdefault('type', 'TLAlignDataPreprocessor')
        super().__init__(
            backbone, *args, data_preprocessor=data_preprocessor, **kwargs)
        self.target = target
        self.transmix_cfg = check_transmix_cfg(transmix_cfg)
        # token CutMix follows the model's patch grid (or fails on another)
        bind_patch_size(getattr(self.data_preprocessor, 'batch_augments',
                                None),
                        get_tracer(self.backbone).patch_size(self.backbone),
                        type(self.backbone).__name__)
        if target == 'transmix':
            check_transmix_backbone(self.backbone)

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
            traced = transmix_target(self.backbone, inputs, pixel_weights,
                                     cls_weights, data_samples,
                                     **self.transmix_cfg)
        else:
            traced = traced_forward(self.backbone, inputs, pixel_weights,
                                    cls_weights)
        # The batch's (aligned, area) (B, S) source weights, left on the
        # device, for monitoring (LabelDriftHook). Neither carries a
        # gradient (labels are computed without one), so nothing to detach.
        self.last_label_weights = (traced.weights, cls_weights)
        feats = self.neck(traced.feats) if self.with_neck else traced.feats
        for sample, score in zip(data_samples, traced.expand(targets)):
            sample.set_gt_score(score)
        return self.head.loss(feats, data_samples)
