"""``TLAlignClassifier``: an ``ImageClassifier`` trained on aligned labels
(or, for comparison on the same model and recipe, on the CutMix or TransMix
target)."""
from typing import List, Optional

import torch
from mmpretrain.models import ImageClassifier
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from tlalign_mm.core import MixRecord, align_options, resolve_align_layers
from tlalign_mm.core.label_drift import label_drift
from tlalign_mm.mixing import TLAlignDataPreprocessor
from tlalign_mm.mixing.wrapper import record_modes

from .aligned_forward import aligned_forward
from .families import describe
from .taps import Recording
from .tlalign_backbone import unwrap
from .transmix import (
    check_transmix_backbone,
    check_transmix_cfg,
    transmix_target,
)

TARGETS = ('tlalign', 'transmix', 'cutmix')


@MODELS.register_module()
class TLAlignClassifier(ImageClassifier):
    """Image classifier whose training target is the TL-Align label (or,
    with ``target``, the CutMix or TransMix target).

    One training step, by calls: the data preprocessor
    (``TLAlignDataPreprocessor``) mixes the batch and returns its
    :class:`~tlalign_mm.core.MixRecord` as ``mix``; mmengine passes it to
    :meth:`forward`, and on to :meth:`loss`, which runs the backbone's
    forward recorded, aligns the labels (:func:`.aligned_forward`) and gives
    the aligned label, in classes, to the head's loss as the ``gt_score`` of
    fresh data samples (label smoothing and the rest of the configured loss
    apply on top). ``predict``, ``val`` and
    ``test`` are ``ImageClassifier``'s.

    ``type='TLAlignClassifier'`` on an mmpretrain recipe is the whole
    change: the classifier builds the recording variants of the recipe's
    ``train_cfg.augments`` (``Mixup``, ``CutMix``, ``ResizeMix``, with
    ``probs``) itself, which draw exactly what mmpretrain's draw.
    ``target`` switches the training target on the same model and recipe.

    What TL-Align cannot train is refused here, before any data loads, each
    with its fix: a backbone that TL-Align does not describe
    (:func:`~tlalign_mm.models.describe`: no token attention, or none a
    family describes); with the ``'tlalign'`` and ``'transmix'`` targets, a
    data preprocessor that records no mix, a recipe with no batch augment,
    and one whose only batch augment is Mixup (every pixel carries the
    same mix, so the aligned target is the Mixup target).

    Args:
        backbone (dict): the backbone config; ``self.backbone`` is that
            backbone, with the recording taps on it. The specified wrapper
            spelling, ``dict(type='TLAlignBackbone', backbone=dict(...),
            align_layers=..., ...)``, is unwrapped: its options go to
            ``align_cfg`` (:func:`.tlalign_backbone.unwrap`).
        align_cfg (dict, optional): ``align_layers``, ``residual_norm``,
            ``follow_drop_path``, ``impl`` (:class:`tlalign_mm.core.
            AlignOptions`), checked here (unknown keys, non-bool switches);
            ``self.align_cfg`` is the checked ``AlignOptions``.
        data_preprocessor (dict, optional): defaults to type
            ``TLAlignDataPreprocessor``, built with ``train_cfg`` as its
            batch augments and the token size the backbone's description
            states (for ``TLTokenCutMix``).
        target (str): the training target of a mixed batch.

            - ``'tlalign'`` (default): the aligned label of what the head
              classifies (TL-Align).
            - ``'transmix'``: TransMix (Chen et al., CVPR 2022) for CutMix and
              token CutMix batches, each source's ``0.5 * lam_area + 0.5 *
              lam_attn`` (:mod:`tlalign_mm.core.transmix`); other batches
              keep the area target. Needs a class-token ViT/DeiT.
            - ``'cutmix'``: the mixed target ``area_share @ targets``: the
              model trains exactly as an ``ImageClassifier``.
        transmix_cfg (dict, optional): ``mask='nearest'`` (default,
            TransMix's own) or ``'fractional'``, see
            :func:`~tlalign_mm.models.transmix.transmix_target`.
        **kwargs: as :class:`mmpretrain.models.ImageClassifier`.

    With the ``'tlalign'`` and ``'transmix'`` targets the loss dict also
    holds the batch's ``label_drift/*``
    (:func:`~tlalign_mm.core.label_drift.label_drift`).
    """

    def __init__(self,
                 backbone: dict,
                 *args,
                 align_cfg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None,
                 target: str = 'tlalign',
                 transmix_cfg: Optional[dict] = None,
                 train_cfg: Optional[dict] = None,
                 **kwargs):
        if target not in TARGETS:
            raise ValueError(
                f'TLAlignClassifier target must be one of {TARGETS}, got '
                f'{target!r}.')
        backbone, align_cfg = unwrap(backbone, align_cfg)
        align_cfg = align_options(align_cfg)
        if not isinstance(backbone, torch.nn.Module):
            backbone = MODELS.build(backbone)
        # What TL-Align records of this backbone, checked once, here.
        description = describe(backbone)
        resolve_align_layers(align_cfg.align_layers, len(description.blocks))
        if isinstance(data_preprocessor, dict) or data_preprocessor is None:
            data_preprocessor = dict(data_preprocessor or {})
            data_preprocessor.setdefault('type', 'TLAlignDataPreprocessor')
            data_preprocessor.setdefault('batch_augments', train_cfg)
        if target != 'cutmix':
            check_recipe(data_preprocessor, target)
        if isinstance(data_preprocessor, dict) and _takes_patch_size(
                data_preprocessor['type']):
            data_preprocessor.setdefault('patch_size', description.token_size)
            data_preprocessor.setdefault('model_name', type(backbone).__name__)
        super().__init__(backbone, *args, data_preprocessor=data_preprocessor,
                         **kwargs)
        self.target = target
        self.align_cfg = align_cfg
        self.transmix_cfg = check_transmix_cfg(transmix_cfg)
        if target == 'transmix':
            check_transmix_backbone(self.backbone)
        # Installed once: torch.compile breaks the graph on registering hooks.
        self.recording = Recording(self.backbone, description)

    def forward(self, inputs: torch.Tensor,
                data_samples: Optional[List[DataSample]] = None,
                mode: str = 'tensor', mix: Optional[MixRecord] = None):
        """``ImageClassifier.forward``; ``mix`` goes to :meth:`loss`."""
        if mode == 'loss':
            return self.loss(inputs, data_samples, mix)
        return super().forward(inputs, data_samples, mode)

    def loss(self, inputs: torch.Tensor, data_samples: List[DataSample],
             mix: Optional[MixRecord] = None) -> dict:
        if self.target == 'cutmix':
            # The mixed gt_score the data preprocessor set is the area
            # target (area_share @ targets): ImageClassifier's loss.
            return super().loss(inputs, data_samples)
        if mix is None or mix.targets is None:
            raise ValueError(
                'TLAlignClassifier needs the batch\'s mix record (the `mix` '
                'that TLAlignDataPreprocessor returns with a mixed training '
                "batch). Use data_preprocessor=dict(type="
                "'TLAlignDataPreprocessor', batch_augments=dict(augments="
                "[dict(type='TLCutMix', alpha=1.0), ...])) and call "
                "model(**data, mode='loss').")
        targets = mix.targets.float()
        num_classes = getattr(self.head, 'num_classes', targets.shape[-1])
        if targets.shape[-1] != num_classes:
            raise ValueError(
                f'The mixing targets have {targets.shape[-1]} classes but the '
                f'head has num_classes={num_classes}: set the same '
                'num_classes in data_preprocessor and head.')
        if self.target == 'transmix':
            aligned = transmix_target(self.backbone, inputs, mix,
                                      recording=self.recording,
                                      **self.transmix_cfg)
        else:
            aligned = aligned_forward(self.backbone, inputs,
                                      mix.pixel_weights, mix.area_share,
                                      self.align_cfg,
                                      recording=self.recording)
        feats = self.neck(aligned.feats) if self.with_neck else aligned.feats
        # Fresh samples: the caller's keep the mixed target.
        samples = [_with_target(sample, score) for sample, score in
                   zip(data_samples, aligned.expand(targets))]
        losses = self.head.loss(feats, samples)
        losses.update(label_drift(aligned.weights, mix.area_share))
        return losses


def _with_target(sample: DataSample, score: torch.Tensor) -> DataSample:
    """A fresh sample with what a head's loss reads: ``score`` as its
    ``gt_score`` and the sample's ``gt_label``, if it has one (not
    ``sample.new()``: its metainfo deep copy costs 1 ms a batch of 64)."""
    fresh = type(sample)(gt_score=score)
    if 'gt_label' in sample:
        fresh.gt_label = sample.gt_label
    return fresh


def _takes_patch_size(preprocessor_type) -> bool:
    cls = MODELS.get(preprocessor_type) if isinstance(
        preprocessor_type, str) else preprocessor_type
    return isinstance(cls, type) and issubclass(cls, TLAlignDataPreprocessor)


def check_recipe(data_preprocessor, target: str) -> None:
    """A clear error, naming the cause and the fix, where a training step
    with ``target`` (``'tlalign'``, ``'transmix'``) would have no mix to
    align: ``data_preprocessor`` (a config or a built one) records none, or
    its batch augments (a recipe's ``train_cfg``) are none or Mixup alone.
    """
    if isinstance(data_preprocessor, dict):
        kind = data_preprocessor['type']
        modes = record_modes(data_preprocessor.get('batch_augments'))
        records = _takes_patch_size(kind)
    else:
        kind = type(data_preprocessor).__name__
        augment = getattr(data_preprocessor, 'batch_augments', None)
        modes = [getattr(a, 'record_mode', None)
                 for a in getattr(augment, 'augments', []) if a is not None]
        records = isinstance(data_preprocessor, TLAlignDataPreprocessor)
    what = f"TLAlignClassifier(target={target!r}) trains on the " \
        f"{'aligned' if target == 'tlalign' else 'TransMix'} label of a " \
        'mixed batch'
    if not records:
        raise ValueError(
            f'{what}, which TLAlignDataPreprocessor records; data_'
            f'preprocessor type={kind!r} records none. Leave its type out '
            "(TLAlignClassifier's default is TLAlignDataPreprocessor).")
    if not modes:
        raise ValueError(
            f'{what}, but this recipe mixes none: give the model '
            "train_cfg.augments, e.g. train_cfg=dict(augments=[dict(type="
            "'CutMix', alpha=1.0)]), or train it with ImageClassifier.")
    if all(mode == 'mixup' for mode in modes):
        raise ValueError(
            f'{what}; this recipe\'s only batch augment is Mixup, which '
            "mixes every pixel alike, so TL-Align's target is Mixup's. Add "
            "CutMix or ResizeMix to train_cfg.augments (DeiT: [dict(type="
            "'Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]), or "
            'train it with ImageClassifier.')
