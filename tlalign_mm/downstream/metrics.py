"""Robustness metrics: accuracy on a class subset (ImageNet-A/R) and the
mean Corruption Error of ImageNet-C."""
from collections import defaultdict
from typing import Optional, Sequence

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log
from mmpretrain.evaluation import Accuracy
from mmpretrain.registry import METRICS

from tlalign_mm.datasets import CORRUPTIONS

#: AlexNet's top-1 error on ImageNet-C, averaged over severities 1-5, per
#: corruption (the normalisation of Corruption Error): Hendrycks &
#: Dietterich, "Benchmarking Neural Network Robustness to Common
#: Corruptions and Perturbations", ICLR 2019, as published with the
#: benchmark (github.com/hendrycks/robustness; the same constants are in
#: AugMix's ``imagenet.py``).
ALEXNET_ERR = dict(
    zip(CORRUPTIONS, (0.886428, 0.894468, 0.922640, 0.819880, 0.826268,
                      0.785948, 0.798360, 0.866816, 0.826572, 0.819324,
                      0.564592, 0.853204, 0.646056, 0.717840, 0.606500)))


@METRICS.register_module()
class SubsetAccuracy(Accuracy):
    """mmpretrain's top-k ``Accuracy`` over a class subset: ImageNet-A and
    -R cover 200 of the 1000 classes, and the protocol takes the arg-max
    over those logits only. The subset is ``subset_indices`` or the
    dataset's ``metainfo['subset_indices']``; a label outside it is a miss.

    Args:
        topk (Sequence[int]): defaults to ``(1, )``.
        subset_indices (Sequence[int], optional): the classes.
        collect_device (str), prefix (str, optional): as BaseMetric.
    """
    default_prefix = 'subset_accuracy'

    def __init__(self, topk: Sequence[int] = (1, ),
                 subset_indices: Optional[Sequence[int]] = None,
                 collect_device: str = 'cpu', prefix: Optional[str] = None):
        super().__init__(topk, thrs=None, collect_device=collect_device,
                         prefix=prefix)
        self.subset = subset_indices

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        subset = self.subset or (self.dataset_meta or {}).get(
            'subset_indices')
        if subset is None:
            raise ValueError('SubsetAccuracy needs subset_indices, or a '
                             "dataset with metainfo['subset_indices']")
        # scores and labels in subset positions (-1: outside, never hit)
        position = {int(c): i for i, c in enumerate(subset)}
        restricted = [dict(pred_score=sample['pred_score'][list(subset)],
                           gt_label=torch.tensor(
                               [position.get(int(sample['gt_label']), -1)]))
                      for sample in data_samples]
        super().process(data_batch, restricted)


def mce(errors: dict, corruptions: Sequence[str] = CORRUPTIONS) -> dict:
    """``CE`` and ``error`` per corruption and ``mCE`` (in [0, 1]) from
    ``errors`` ``{(corruption, severity): top-1 error}``: ``CE_c = sum_s
    E_{s,c} / sum_s E^AlexNet_{s,c}`` (Hendrycks & Dietterich 2019; AlexNet's
    are means over 5 severities: the ratio of means)."""
    ce, err = {}, {}
    for c in corruptions:
        per_severity = [e for (cc, _), e in errors.items() if cc == c]
        if not per_severity:
            raise ValueError(f'no results for corruption {c!r}')
        err[c] = float(np.mean(per_severity))
        ce[c] = err[c] / ALEXNET_ERR[c]
    return dict(CE=ce, error=err, mCE=float(np.mean(list(ce.values()))))


@METRICS.register_module()
class CorruptionError(BaseMetric):
    """ImageNet-C: mean Corruption Error (mCE), normalised by AlexNet.

    Each sample carries ``corruption`` and ``severity`` (``ImageNetC``
    through ``PackInputs(meta_keys=(..., 'corruption', 'severity'))``).
    Reports, in percent, ``mCE``, ``top1``, and per corruption ``CE/<name>``
    and ``error/<name>``; every severity of every corruption must be there.

    Args:
        corruptions (Sequence[str]): defaults to the 15 of mCE.
        severities (Sequence[int]): defaults to 1-5.
        collect_device (str), prefix (str, optional): as BaseMetric.
    """
    default_prefix = 'imagenet_c'

    def __init__(self, corruptions: Sequence[str] = CORRUPTIONS,
                 severities: Sequence[int] = (1, 2, 3, 4, 5),
                 collect_device: str = 'cpu', prefix: Optional[str] = None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        unknown = [c for c in corruptions if c not in ALEXNET_ERR]
        if unknown:
            raise ValueError(f'no AlexNet reference error for {unknown}; '
                             f'mCE is defined over {list(CORRUPTIONS)}')
        self.corruptions = tuple(corruptions)
        self.severities = tuple(int(s) for s in severities)

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            if 'corruption' not in sample or 'severity' not in sample:
                raise KeyError('CorruptionError needs `corruption` and '
                               '`severity` in each data sample: ImageNetC with'
                               " PackInputs(meta_keys=(..., 'corruption', "
                               "'severity'))")
            pred = sample['pred_score'].argmax() if 'pred_score' in sample \
                else sample['pred_label']
            self.results.append((sample['corruption'], int(sample['severity']),
                                 int(pred) == int(sample['gt_label'])))

    def compute_metrics(self, results: list) -> dict:
        hits = defaultdict(list)
        for corruption, severity, correct in results:
            hits[(corruption, severity)].append(correct)
        missing = [f'{c}/{s}' for c in self.corruptions
                   for s in self.severities if (c, s) not in hits]
        if missing:
            raise ValueError(f'ImageNet-C results miss {len(missing)} '
                             f'corruption/severity pairs: {missing[:5]}')
        errors = {(c, s): 1.0 - float(np.mean(hits[(c, s)]))
                  for c in self.corruptions for s in self.severities}
        result = mce(errors, self.corruptions)
        if set(self.corruptions) != set(CORRUPTIONS):
            print_log('mCE over a subset of the 15 ImageNet-C corruptions: '
                      f'{list(self.corruptions)}', 'current', 30)
        correct = [x for pair in errors for x in hits[pair]]
        return dict({f'{k}/{c}': 100.0 * result[k][c] for c in
                     self.corruptions for k in ('CE', 'error')},
                    mCE=100.0 * result['mCE'], top1=100.0 * np.mean(correct))
