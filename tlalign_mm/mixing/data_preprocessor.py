"""ClsDataPreprocessor that returns the batch's mix record with the batch."""
from typing import Optional, Tuple

import torch
from mmpretrain.models.utils.data_preprocessor import ClsDataPreprocessor
from mmpretrain.registry import MODELS

from .wrapper import TLRandomBatchAugment


@MODELS.register_module()
class TLAlignDataPreprocessor(ClsDataPreprocessor):
    """mmpretrain's :class:`ClsDataPreprocessor` that returns the batch mix's
    record with the batch.

    It is :class:`ClsDataPreprocessor` (it normalises, pads, stacks, builds
    one-hot scores and, in training, mixes the normalised padded batch)
    with a :class:`TLRandomBatchAugment` as its batch augmentation, which
    builds mmpretrain's ``Mixup`` / ``CutMix`` / ``ResizeMix`` configs as
    their recording variants (``TLMixup`` / ``TLCutMix`` /
    ``TLResizeMix``). The mixed ``gt_score`` set on each data sample is the
    one :class:`ClsDataPreprocessor` would set with the corresponding
    mmpretrain augment (same random draws), so a plain classifier trains
    exactly as with it.

    In training with batch augmentations, the returned dict has one more
    key, ``mix``: the batch's :class:`~tlalign_mm.core.MixRecord` (``S`` =
    number of sources: 2 for the two-source mixes, 1 when the random choice
    was "no mixing"), with its ``targets`` ``(B, S, C)``, the unmixed scores
    of each sample's sources. mmengine passes it to the model's ``forward``
    as the keyword ``mix`` (``model(**data, mode=...)``), so it reaches
    ``TLAlignClassifier.loss`` through calls. ``gt_score == area_share @
    targets`` for every sample. Nothing is kept on the preprocessor or the
    augments between calls; without training or batch augmentations it is
    :class:`ClsDataPreprocessor` and returns no ``mix``.

    Args:
        *args, **kwargs: :class:`ClsDataPreprocessor`'s ``mean``, ``std``,
            ``pad_size_divisor``, ``pad_value``, ``to_rgb``, ``to_onehot``
            (forced on with batch augmentations) and ``num_classes``.
        batch_augments (dict, optional): ``augments`` and ``probs`` of
            :class:`TLRandomBatchAugment`. Defaults to None.
        patch_size (tuple, optional): ``(ph, pw)`` of the model's patches,
            and ``model_name`` its name: ``TLAlignClassifier`` builds its
            preprocessor with them, so that augments that follow the token
            grid (``TLTokenCutMix``) are built with the model's patch size.
    """

    def __init__(self,
                 *args,
                 batch_augments: Optional[dict] = None,
                 patch_size: Optional[Tuple[int, int]] = None,
                 model_name: Optional[str] = None,
                 **kwargs):
        # ClsDataPreprocessor's own arguments (mean, std, ...), without
        # its batch augmentation: ours returns the record.
        super().__init__(*args, batch_augments=None, **kwargs)

        if batch_augments:
            if not isinstance(batch_augments, dict):
                raise TypeError(
                    'TLAlignDataPreprocessor: batch_augments must be a dict '
                    "like dict(augments=[dict(type='CutMix', alpha=1.0)], "
                    f'probs=None), got {type(batch_augments).__name__}')
            self.batch_augments = TLRandomBatchAugment(
                **batch_augments, patch_size=patch_size,
                model_name=model_name)
            if not self.to_onehot:
                from mmengine.logging import MMLogger
                MMLogger.get_current_instance().info(
                    'Because batch augmentations are enabled, the data '
                    'preprocessor automatically enables the `to_onehot` '
                    'option to generate one-hot format labels.')
                self.to_onehot = True

    def forward(self, data: dict, training: bool = False) -> dict:
        """Pre-process with :class:`ClsDataPreprocessor`; in training, mix
        with :class:`TLRandomBatchAugment` and return the record as
        ``mix``.

        Args:
            data (dict): data sampled from dataloader.
            training (bool): Whether to enable training time augmentation.

        Returns:
            dict: ``inputs``, ``data_samples`` and, for a mixed training
            batch, ``mix``.
        """
        mixing = training and self.batch_augments is not None
        # ClsDataPreprocessor's normalisation, padding and one-hot scores,
        # without its mixing: it would not hand the record back.
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
