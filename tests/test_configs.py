"""Every config resolves to the dict recorded in tests/config_snapshot.txt;
every TL-Align ImageNet config differs from its CutMix (or ResizeMix) twin
only in the target.

The snapshot holds a digest of each config's resolved dict
(``Config.fromfile(path).to_dict()``, with the configs' ``{{$VAR:...}}``
environment variables unset). A refactor of ``configs/`` must leave it
unchanged; an intentional change rewrites it in the same commit:

    PYTHONPATH=$PWD python -m tests.config_snapshot --update
    PYTHONPATH=$PWD python -m tests.config_snapshot --check
    PYTHONPATH=$PWD python -m tests.config_snapshot --diff CONFIG [--ref REV]

(``--diff`` prints a readable unified diff of one config's resolved dict
between a git revision, default HEAD, and the working tree;
see tests/config_snapshot.py.)"""
import glob
import os.path as osp

import pytest
from mmengine.config import Config
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401

from .config_snapshot import (
    config_paths,
    digest,
    read_snapshot,
    resolved_text,
)

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
ALL = sorted(
    p for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'),
                         recursive=True) if '_base_' not in p)


def twin_of(path):
    """The area-target twin of a TL-Align config: ``*_tlalign.py`` ->
    ``*_cutmix.py``, ``*_tlalign-resizemix.py`` -> ``*_resizemix.py``."""
    return path.replace('_tlalign.py', '_cutmix.py').replace(
        '_tlalign-resizemix.py', '_resizemix.py')


TWINS = sorted(
    p for p in glob.glob(osp.join(ROOT, 'configs', 'tlalign', '*_tlalign*.py'))
    if twin_of(p) != p and osp.exists(twin_of(p)))
TL_AUGMENTS = {'TLMixup': 'Mixup', 'TLCutMix': 'CutMix',
               'TLResizeMix': 'ResizeMix'}


def rel(path):
    return osp.relpath(path, ROOT)


SNAPSHOT = read_snapshot()


def test_snapshot_lists_every_config():
    assert sorted(SNAPSHOT) == config_paths() == [rel(p) for p in ALL], \
        'configs were added or removed: run ' \
        '`PYTHONPATH=$PWD python -m tests.config_snapshot --update`'


@pytest.mark.parametrize('path', ALL, ids=rel)
def test_config_resolves_to_the_snapshot(path):
    text = resolved_text(rel(path))
    assert "'model'" in text
    assert digest(text) == SNAPSHOT.get(rel(path)), (
        f'{rel(path)} resolves to another dict than the snapshot. If that '
        'is intended, see the diff with `PYTHONPATH=$PWD python -m '
        f'tests.config_snapshot --diff {rel(path)}` and run `... --update` '
        'in the same commit.')


def _without_target(model):
    model = dict(model)
    model.pop('type')
    augments = model.pop('train_cfg')['augments']
    return model, [(a.pop('type'), a) for a in map(dict, augments)]


@pytest.mark.parametrize('path', TWINS, ids=rel)
def test_only_the_target_differs_from_the_cutmix_twin(path):
    ours = Config.fromfile(path)
    twin = Config.fromfile(twin_of(path))
    assert ours.model.type == 'TLAlignClassifier'
    assert twin.model.type == 'ImageClassifier'
    ours_model, ours_aug = _without_target(ours.model.to_dict())
    twin_model, twin_aug = _without_target(twin.model.to_dict())
    assert ours_model == twin_model
    # The recording augments, with the same arguments.
    assert [(TL_AUGMENTS[a], args) for a, args in ours_aug] == twin_aug
    strip = ('model', 'custom_imports', 'filename')
    assert {k: v for k, v in ours.to_dict().items() if k not in strip} == \
        {k: v for k, v in twin.to_dict().items() if k not in strip}


@pytest.mark.parametrize(
    'path', [p for p in TWINS if 'base' not in osp.basename(p)], ids=rel)
def test_tlalign_model_has_the_twins_checkpoint_keys(path):
    ours = MODELS.build(Config.fromfile(path).model)
    twin = MODELS.build(Config.fromfile(twin_of(path)).model)
    assert type(ours.data_preprocessor).__name__ == 'TLAlignDataPreprocessor'
    assert set(ours.state_dict()) == set(twin.state_dict())


def test_the_resizemix_twin_only_swaps_cutmix_for_resizemix():
    """The ResizeMix recipe is the DeiT-S CutMix twin with its CutMix 1.0
    swapped for ResizeMix at mmpretrain's defaults (resizemix.py:55-61)."""
    ours = Config.fromfile(osp.join(
        ROOT, 'configs/tlalign/deit-small_4xb256-resizemix_in1k.py')).to_dict()
    twin = Config.fromfile(osp.join(
        ROOT, 'configs/tlalign/deit-small_4xb256-cutmix_in1k.py')).to_dict()
    augments = ours['model']['train_cfg'].pop('augments')
    twin_augments = twin['model']['train_cfg'].pop('augments')
    assert twin_augments == [dict(type='Mixup', alpha=0.8),
                             dict(type='CutMix', alpha=1.0)]
    assert augments == [
        dict(type='Mixup', alpha=0.8),
        dict(type='ResizeMix', alpha=1.0, lam_min=0.1, lam_max=0.8)]
    assert ours == twin
