"""LabelDriftHook: the epoch's numbers by hand from the loss dict's
``label_drift/*`` values, no host sync per step. (On real runs, per-epoch
values with TL-Align and none with CutMix: tests/e2e/test_run_demo.py.)"""
import math
from types import SimpleNamespace

import pytest
import torch
from mmengine.logging import MMLogger
from mmpretrain.registry import HOOKS

import tlalign_mm  # noqa: F401  (registers the hook)
from tlalign_mm.core.label_drift import label_drift
from tlalign_mm.testing.cost import SyncCounter


def H(*p):
    return -sum(x * math.log(x) for x in p if x > 0)


def step(hook, runner, target, area):
    """One training step whose loss dict reports the drift of ``target``
    from ``area`` (as TLAlignClassifier.loss does)."""
    outputs = dict(loss=torch.tensor(1.),
                   **label_drift(torch.tensor(target), torch.tensor(area)))
    hook.after_train_iter(runner, 0, outputs=outputs)


def test_built_from_config_and_epoch_means_by_hand():
    hook = HOOKS.build(dict(type='LabelDriftHook'))
    calls = []
    runner = SimpleNamespace(
        model=torch.nn.Module(), epoch=4,
        logger=MMLogger.get_instance('test_label_drift_hook'),
        visualizer=SimpleNamespace(add_scalars=lambda scalars, step: (
            calls.append((dict(scalars), step)))))
    hook.before_train_epoch(runner)
    with SyncCounter() as steps:  # no read-back per step, one per epoch
        # batch 1: |diff| 0.3 and 0.2; sample 0 flips (0 vs 1), 1 not
        step(hook, runner, [[0.7, 0.3], [0.4, 0.6]],
             [[0.4, 0.6], [0.2, 0.8]])
        # batch 2, one sample: |diff| 0.55, flips (0 vs 1)
        step(hook, runner, [[1.0, 0.0]], [[0.45, 0.55]])
        # a step whose loss reports no drift (target='cutmix'): nothing
        hook.after_train_iter(runner, 2, outputs=dict(loss=torch.tensor(1.)))
    with SyncCounter() as epoch:
        hook.after_train_epoch(runner)
    assert (len(steps.calls), len(epoch.calls)) == (0, 1)
    [(scalars, step_)] = calls
    assert step_ == 5 and scalars['epoch'] == 5
    # the mean over batches of each batch's mean
    assert scalars['label_drift_epoch/abs_diff'] == pytest.approx(
        ((0.3 + 0.2) / 2 + 0.55) / 2)
    assert scalars['label_drift_epoch/entropy'] == pytest.approx(
        ((H(0.7, 0.3) + H(0.4, 0.6)) / 2 + H(1.0, 0.0)) / 2)
    assert scalars['label_drift_epoch/entropy_area'] == pytest.approx(
        ((H(0.4, 0.6) + H(0.2, 0.8)) / 2 + H(0.45, 0.55)) / 2)
    assert scalars['label_drift_epoch/flip_rate'] == pytest.approx(
        (1 / 2 + 1) / 2)
    assert not any(k.startswith('label_drift/') for k in scalars)
    # the next epoch starts from zero; an epoch without weights logs nothing
    hook.before_train_epoch(runner)
    hook.after_train_epoch(runner)
    assert len(calls) == 1
