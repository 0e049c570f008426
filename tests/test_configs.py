"""Every config parses; every TL-Align ImageNet config differs from its
CutMix twin only in the target."""
import glob
import os.path as osp

import pytest
from mmengine.config import Config
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
ALL = sorted(
    p for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'),
                         recursive=True) if '_base_' not in p)
TWINS = sorted(
    p for p in glob.glob(osp.join(ROOT, 'configs', 'tlalign', '*_tlalign.py'))
    if osp.exists(p.replace('_tlalign.py', '_cutmix.py')))
TL_AUGMENTS = {'TLMixup': 'Mixup', 'TLCutMix': 'CutMix'}


def rel(path):
    return osp.relpath(path, ROOT)


@pytest.mark.parametrize('path', ALL, ids=rel)
def test_config_parses(path):
    cfg = Config.fromfile(path)
    assert 'model' in cfg


def _without_target(model):
    model = dict(model)
    model.pop('type')
    augments = model.pop('train_cfg')['augments']
    return model, [a['type'] for a in augments]


@pytest.mark.parametrize('path', TWINS, ids=rel)
def test_only_the_target_differs_from_the_cutmix_twin(path):
    ours = Config.fromfile(path)
    twin = Config.fromfile(path.replace('_tlalign.py', '_cutmix.py'))
    assert ours.model.type == 'TLAlignClassifier'
    assert twin.model.type == 'ImageClassifier'
    ours_model, ours_aug = _without_target(ours.model.to_dict())
    twin_model, twin_aug = _without_target(twin.model.to_dict())
    assert ours_model == twin_model
    assert [TL_AUGMENTS[a] for a in ours_aug] == twin_aug
    strip = ('model', 'custom_imports', 'filename')
    assert {k: v for k, v in ours.to_dict().items() if k not in strip} == \
        {k: v for k, v in twin.to_dict().items() if k not in strip}


@pytest.mark.parametrize(
    'path', [p for p in TWINS if 'base' not in osp.basename(p)], ids=rel)
def test_tlalign_model_has_the_twins_checkpoint_keys(path):
    ours = MODELS.build(Config.fromfile(path).model)
    twin = MODELS.build(
        Config.fromfile(path.replace('_tlalign.py', '_cutmix.py')).model)
    assert type(ours.data_preprocessor).__name__ == 'TLAlignDataPreprocessor'
    assert set(ours.state_dict()) == set(twin.state_dict())
