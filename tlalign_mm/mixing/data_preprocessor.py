"""ClsDataPreprocessor that returns the batch's mix record with the batch."""
from typing import Optional, Tuple

import torch
from mmpretrain.models.utils.data_preprocessor import ClsDataPreprocessor
from mmpretrain.registry import MODELS

from .wrapper import TLRandomBatchAugment


@MODELS.register_module()
class TLAlignDataPreprocessor(ClsDataPreprocessor):
    """mmpretrain's :class:`ClsDataPreprocessor` that returns the batch
    mix's record with the batch.

    It normalises, pads, stacks and builds one-hot scores as
    :class:`ClsDataPreprocessor`, and in training mixes the result with a
    :class:`TLRandomBatchAugment` (mmpretrain's ``Mixup`` / ``CutMix`` /
    ``ResizeMix`` configs built as their recording variants): each sample's
    mixed ``gt_score`` is the one mmpretrain's augment would set (same
    draws), so a plain classifier trains exactly as with it. A mixed
    training batch's dict has one more key, ``mix``: its
    :class:`~tlalign_mm.core.MixRecord` (one source when the choice was "no
    mixing"), with ``targets`` ``(B, S, C)`` the sources' unmixed scores
    (``gt_score == area_share @ targets``). mmengine passes it to the
    model's ``forward`` as the keyword ``mix``, so it reaches
    ``TLAlignClassifier.loss`` through calls; nothing is kept between calls.

    Args:
        *args, **kwargs: :class:`ClsDataPreprocessor`'s ``mean``, ``std``,
            ``pad_size_divisor``, ``pad_value``, ``to_rgb``, ``to_onehot``
            (forced on with batch augmentations) and ``num_classes``.
        batch_augments (dict, optional): ``augments`` and ``probs`` of
            :class:`TLRandomBatchAugment`. Defaults to None.
        patch_size (tuple, optional), model_name (str, optional): the
            model's, for :class:`TLRandomBatchAugment`
            (``TLAlignClassifier`` gives them).
    """

    def __init__(self,
                 *args,
                 batch_augments: Optional[dict] = None,
                 patch_size: Optional[Tuple[int, int]] = None,
                 model_name: Optional[str] = None,
                 **kwargs):
        augments = None
        if batch_augments:
            if not isinstance(batch_augments, dict):
                raise TypeError(
                    'TLAlignDataPreprocessor: batch_augments must be a dict '
                    "like dict(augments=[dict(type='CutMix', alpha=1.0)], "
                    f'probs=None), got {type(batch_augments).__name__}')
            augments = TLRandomBatchAugment(
                **batch_augments, patch_size=patch_size,
                model_name=model_name)
        # ClsDataPreprocessor's own handling of batch augments (to_onehot
        # forced on, with its log line); its RandomBatchAugment is then
        # replaced by ours, which draws the same and records
        super().__init__(*args, batch_augments=batch_augments, **kwargs)
        self.batch_augments = augments

    def forward(self, data: dict, training: bool = False) -> dict:
        """``inputs``, ``data_samples`` and, for a mixed training batch,
        ``mix``."""
        mixing = training and self.batch_augments is not None
        # ClsDataPreprocessor's mixing would not hand the record back.
        data = super().forward(data, training=training and not mixing)
        samples = data['data_samples']
        if not mixing or not samples or 'gt_score' not in samples[0]:
            return data
        scores = torch.stack([s.gt_score for s in samples]).float()
        inputs, mixed, record = self.batch_augments.mix_with_record(
            data['inputs'], scores)
        for sample, score in zip(samples, mixed):
            sample.set_gt_score(score)
        return dict(data, inputs=inputs, mix=record.with_targets(scores))
