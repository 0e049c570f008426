"""ClsDataPreprocessor that records each mix on the data samples."""
from numbers import Number
from typing import Optional, Sequence

from mmpretrain.models.utils.data_preprocessor import ClsDataPreprocessor
from mmpretrain.registry import MODELS

from .wrapper import TLRandomBatchAugment


@MODELS.register_module()
class TLAlignDataPreprocessor(ClsDataPreprocessor):
    """mmpretrain's :class:`ClsDataPreprocessor` that records the batch mix.

    It is :class:`ClsDataPreprocessor` (it normalises, pads, stacks, builds
    one-hot scores and, in training, mixes the normalised padded batch)
    with a :class:`TLRandomBatchAugment` as its batch augmentation (so the
    augments must be recording ones, e.g. ``TLCutMix`` / ``TLMixup``). The
    mixed ``gt_score`` set on each data sample is the one
    :class:`ClsDataPreprocessor` would set with the corresponding
    mmpretrain augment (same random draws), so a plain classifier trains
    exactly as with it.

    In that case each :class:`DataSample` also gets (``S`` = number of
    sources of the batch: 2 for the two-source mixes, 1 when the random
    choice was "no mixing"; ``C`` = number of classes; ``H, W`` = the size of
    the padded batch):

    - ``mix_pixel_weights``: ``(S, H, W)`` float32, each pixel's share of each
      source (sums to 1 over ``S``);
    - ``mix_targets``: ``(S, C)`` float, the unmixed scores of the sample's
      sources, ``batch_score[source_index[b]]``;
    - ``mix_cls_weights``: ``(S, )`` float32, each source's area share, so
      ``gt_score == mix_cls_weights @ mix_targets``.

    Nothing is kept on the preprocessor between calls. Without training or
    without batch augmentations it is :class:`ClsDataPreprocessor` and adds
    no ``mix_*`` field.

    Args:
        mean (Sequence[Number], optional): The pixel mean of R, G, B channels.
            Defaults to None.
        std (Sequence[Number], optional): The pixel standard deviation of
            R, G, B channels. Defaults to None.
        pad_size_divisor (int): The size of padded image should be
            divisible by ``pad_size_divisor``. Defaults to 1.
        pad_value (Number): The padded pixel value. Defaults to 0.
        to_rgb (bool): whether to convert image from BGR to RGB.
            Defaults to False.
        to_onehot (bool): Whether to generate one-hot format gt-labels and set
            to data samples. Defaults to False (forced on with batch
            augmentations).
        num_classes (int, optional): The number of classes. Defaults to None.
        batch_augments (dict, optional): ``augments`` and ``probs`` of
            :class:`TLRandomBatchAugment`. Defaults to None.
    """

    def __init__(self,
                 mean: Sequence[Number] = None,
                 std: Sequence[Number] = None,
                 pad_size_divisor: int = 1,
                 pad_value: Number = 0,
                 to_rgb: bool = False,
                 to_onehot: bool = False,
                 num_classes: Optional[int] = None,
                 batch_augments: Optional[dict] = None):
        super().__init__(
            mean=mean,
            std=std,
            pad_size_divisor=pad_size_divisor,
            pad_value=pad_value,
            to_rgb=to_rgb,
            to_onehot=to_onehot,
            num_classes=num_classes,
            batch_augments=None)

        if batch_augments:
            if not isinstance(batch_augments, dict):
                raise TypeError(
                    'TLAlignDataPreprocessor: batch_augments must be a dict '
                    "like dict(augments=[dict(type='TLCutMix', alpha=1.0)], "
                    f'probs=None), got {type(batch_augments).__name__}')
            self.batch_augments = TLRandomBatchAugment(**batch_augments)
            if not self.to_onehot:
                from mmengine.logging import MMLogger
                MMLogger.get_current_instance().info(
                    'Because batch augmentations are enabled, the data '
                    'preprocessor automatically enables the `to_onehot` '
                    'option to generate one-hot format labels.')
                self.to_onehot = True

    def forward(self, data: dict, training: bool = False) -> dict:
        """Pre-process with :class:`ClsDataPreprocessor`, which mixes with
        :class:`TLRandomBatchAugment`; in training, also attach the mix's
        record to the data samples.

        Args:
            data (dict): data sampled from dataloader.
            training (bool): Whether to enable training time augmentation.

        Returns:
            dict: Data in the same format as the model input.
        """
        data = super().forward(data, training=training)
        if not training or self.batch_augments is None:
            return data
        # ClsDataPreprocessor mixed the batch (one pass, one gt_score per
        # sample) if it had scores to mix; the record waits on the augment.
        taken = self.batch_augments.take_record()
        if taken is None:
            return data
        record, scores = taken
        # One unbind per field (not a select per sample and field).
        rows = zip(data['data_samples'], record.pixel_weights.unbind(0),
                   record.source_targets(scores.float()).unbind(0),
                   record.cls_weights.unbind(0))
        for sample, pixel_weights, targets, cls_weights in rows:
            sample.set_field(pixel_weights, 'mix_pixel_weights')
            sample.set_field(targets, 'mix_targets')
            sample.set_field(cls_weights, 'mix_cls_weights')
            sample.set_field(record.mode, 'mix_mode', field_type='metainfo')
        return data
