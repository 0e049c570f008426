"""``LabelDriftHook``: per epoch, how far the training targets moved from the
CutMix (area) targets."""
from typing import Optional

import torch
from mmengine.dist import all_reduce
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmpretrain.registry import HOOKS

# the sums kept per epoch, in this order
_FIELDS = ('abs_diff', 'entropy', 'entropy_area', 'flip_rate')


@HOOKS.register_module()
class LabelDriftHook(Hook):
    """Log, per training epoch, how far the target a ``TLAlignClassifier``
    trained on (TL-Align's aligned label, or TransMix's) is from the area
    label CutMix would have used, both as ``(B, S)`` source weights:

    - ``label_drift/abs_diff``: mean over samples and sources of
      ``|w_target - w_area|`` (for two sources, ``|lambda_target -
      lambda_area|``);
    - ``label_drift/entropy``: mean entropy (nats) of the target's source
      weights, ``-sum_s w log w`` (``ln 2`` for an even two-source mix, 0
      for one source); ``label_drift/entropy_area``: the same of the area
      label, for reference;
    - ``label_drift/flip_rate``: the share of samples whose target gives the
      most weight to another source than the area label does.

    The values go to the runner's logger and, with ``step`` the epoch
    number, to its visualizer (``vis_data/scalars.json``). A model that does
    not expose ``last_label_weights`` (an ``ImageClassifier``, or a
    ``TLAlignClassifier`` with ``target='cutmix'``) logs nothing.

    The sums stay on the model's device during the epoch and are read back
    once, at its end: no host-device synchronisation per step. Under
    distributed training they are summed over the ranks.
    """

    priority = 'NORMAL'

    def __init__(self):
        self._sums: Optional[torch.Tensor] = None

    def before_train_epoch(self, runner) -> None:
        self._sums = None

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs=None) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) \
            else runner.model
        weights = getattr(model, 'last_label_weights', None)
        if weights is None:
            return
        # consumed: a step that sets nothing must not count this batch again
        model.last_label_weights = None
        target, area = (w.float() for w in weights)
        sums = torch.stack([
            (target - area).abs().mean(1).sum(),
            -torch.special.xlogy(target, target).sum(),
            -torch.special.xlogy(area, area).sum(),
            (target.argmax(1) != area.argmax(1)).sum().float(),
            # filled on the device (new_tensor would copy from the host,
            # which waits for the GPU)
            target.new_full((), float(len(target))),
        ])
        self._sums = sums if self._sums is None else self._sums + sums

    def after_train_epoch(self, runner) -> None:
        if self._sums is None:
            return
        sums = self._sums
        self._sums = None
        all_reduce(sums)  # a no-op unless distributed
        *totals, count = sums.tolist()  # the epoch's one read-back
        values = {f'label_drift/{name}': total / count
                  for name, total in zip(_FIELDS, totals)}
        epoch = runner.epoch + 1
        runner.logger.info(
            f'Epoch(train) [{epoch}] label drift: |target - area| '
            f"{values['label_drift/abs_diff']:.4f}, entropy "
            f"{values['label_drift/entropy']:.4f} (area "
            f"{values['label_drift/entropy_area']:.4f}) nats, flipped "
            f"{values['label_drift/flip_rate']:.2%}")
        runner.visualizer.add_scalars(dict(values, epoch=epoch), step=epoch)
