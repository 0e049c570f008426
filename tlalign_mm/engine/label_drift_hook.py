"""``LabelDriftHook``: per epoch, how far the training targets moved from the
CutMix (area) targets."""
from typing import Optional

import torch
from mmengine.dist import all_reduce
from mmengine.hooks import Hook
from mmpretrain.registry import HOOKS

from tlalign_mm.core.label_drift import DRIFT_NAMES

_KEYS = tuple(f'label_drift/{name}' for name in DRIFT_NAMES)
#: the epoch means' names: the training log already writes the loss dict's
#: per-step ``label_drift/*`` under those names, with the iteration as step
EPOCH_KEYS = tuple(f'label_drift_epoch/{name}' for name in DRIFT_NAMES)


@HOOKS.register_module()
class LabelDriftHook(Hook):
    """Log per training epoch how far a ``TLAlignClassifier``'s target
    (aligned or TransMix) is from CutMix's area label: the epoch means of
    the ``label_drift/*`` values of its loss dict
    (:func:`tlalign_mm.core.label_drift.label_drift`), each batch once, as
    ``label_drift_epoch/<name>`` to the logger and, with the epoch as
    step, the visualizer. A loss without them logs nothing. The sums stay
    on the device (summed over ranks) and are read back once per epoch.
    """

    priority = 'NORMAL'

    def __init__(self):
        self._sums: Optional[torch.Tensor] = None

    def before_train_epoch(self, runner) -> None:
        self._sums = None

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs=None) -> None:
        if not outputs or _KEYS[0] not in outputs:
            return
        values = [torch.as_tensor(outputs[k]).float() for k in _KEYS]
        sums = torch.stack(values + [torch.ones_like(values[0])])
        self._sums = sums if self._sums is None else self._sums + sums

    def after_train_epoch(self, runner) -> None:
        if self._sums is None:
            return
        all_reduce(self._sums)  # a no-op unless distributed
        *totals, count = self._sums.tolist()  # the epoch's one read-back
        values = {k: total / count for k, total in zip(EPOCH_KEYS, totals)}
        epoch = runner.epoch + 1
        runner.logger.info(f'Epoch(train) [{epoch}] ' + ', '.join(
            f'{k}: {v:.4f}' for k, v in values.items()))
        runner.visualizer.add_scalars(dict(values, epoch=epoch), step=epoch)
