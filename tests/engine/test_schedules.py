"""check_schedule refuses exactly the schedules mmengine cannot build for the
run's length, naming the warm-up; the options it suggests build; and
tools/train.py checks before it builds anything."""
import glob
import os.path as osp
import shlex

import mmpretrain
import pytest
import torch
from mmengine.config import Config, DictAction
from mmengine.logging import MMLogger
from mmengine.optim import OptimWrapper
from mmengine.runner import EpochBasedTrainLoop, Runner

from tests.cli import ROOT
from tlalign_mm.apis import build_train_runner, parse_train_args
from tlalign_mm.engine.schedules import check_schedule

# mmpretrain's DeiT recipe (a 20-epoch warm-up) and the demo's (3 epochs)
DEIT = osp.join(osp.dirname(mmpretrain.__file__), '.mim', 'configs', 'deit',
                'deit-tiny_4xb256_in1k.py')
DEMO = sorted(glob.glob(osp.join(ROOT, 'configs', 'demo', '*.py')))[0]


def build_schedulers(cfg):
    """The Runner's own build (a missing ``end`` is ``max_epochs``), 2
    iterations an epoch; returns the schedulers and the optimizer."""
    runner = object.__new__(Runner)
    runner._train_loop = object.__new__(EpochBasedTrainLoop)
    runner._train_loop._max_epochs = cfg.train_cfg.max_epochs
    runner._train_loop.dataloader = [0, 1]
    runner.logger = MMLogger.get_current_instance()
    runner.optim_wrapper = OptimWrapper(torch.optim.AdamW([torch.zeros(1)],
                                                          lr=1e-3))
    schedulers = runner.build_param_scheduler(cfg.param_scheduler)
    return schedulers, runner.optim_wrapper


def suggested(message: str) -> dict:
    """The ``--cfg-options`` the message suggests, parsed as the tools do."""
    options = shlex.split(message.split('--cfg-options ')[1])
    namespace = type('Args', (), {})()
    DictAction(option_strings=[], dest='o')(None, namespace, options)
    return namespace.o


@pytest.mark.parametrize('config, max_epochs', [
    (DEIT, 1), (DEIT, 20), (DEIT, 21), (DEMO, 3), (DEMO, 4)],
    ids=['deit-1', 'deit-20', 'deit-21', 'demo-3', 'demo-4'])
def test_refuses_what_mmengine_cannot_build(config, max_epochs):
    cfg = Config.fromfile(config)
    cfg.train_cfg.max_epochs = max_epochs
    try:
        build_schedulers(cfg)
    except ValueError as error:
        assert 'end should be larger than begin' in str(error)
        with pytest.raises(ValueError, match=r'after the warm-up \(param_'
                           r'scheduler.0: LinearLR, epochs 0-') as info:
            check_schedule(cfg)
        cfg.merge_from_dict(suggested(str(info.value)))
        build_schedulers(cfg)
    check_schedule(cfg)


def test_train_checks_before_building_the_runner(tmp_path):
    work = tmp_path / 'work'
    args = parse_train_args([DEMO, '--work-dir', str(work), '--cfg-options',
                             'train_cfg.max_epochs=3'])
    with pytest.raises(ValueError, match='train_cfg.max_epochs=3 ends the'):
        build_train_runner(args)
    assert not work.exists()


def test_the_demo_cosine_ends_at_max_epochs():
    """The Runner's own scheduler build (``end`` left to ``max_epochs``),
    stepped as its loop does: 6 epochs of 2 iterations, the 3-epoch
    warm-up per iteration, the cosine per epoch: in the last epoch, lr =
    1e-5 + (1e-3 - 1e-5) * (1 + cos(2 pi / 3)) / 2 = 2.575e-4 (not the
    value a cosine over the recipe's 27 epochs would have)."""
    cfg = Config.fromfile(DEMO)
    cfg.train_cfg.max_epochs = 6
    schedulers, optim_wrapper = build_schedulers(cfg)
    for by_epoch in [False, False, True] * 5 + [False]:
        for s in schedulers:
            if s.by_epoch == by_epoch:
                s.step()
    # a few ulp of the chained float64 products
    assert optim_wrapper.get_lr()['lr'][0] == pytest.approx(
        2.575e-4, rel=1e-12)
