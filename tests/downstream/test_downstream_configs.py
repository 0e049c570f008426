"""Every downstream config loads its backbone with the strict loader from a
TL-Align (or, in its twin, CutMix) ImageNet checkpoint of this repository
(for DeiT-B and Swin-B the paper's protocol: the 40-epoch TL-Align
fine-tune of the official checkpoint, and the official checkpoint itself;
that the twins differ only in it: tests/test_configs.py), and the real-size
backbone of each pretraining config loads strictly into the real-size
backbone of each downstream config (the only resize being ViT's pos_embed,
14x14 -> 32x32 patches at 512)."""
import glob
import os.path as osp
import re

import pytest
from mmengine.registry import MODELS, init_default_scope

import tlalign_mm.downstream  # noqa: F401
from tlalign_mm.checkpoint import load_strictly
from tlalign_mm.registry import SCOPE

from ..config_snapshot import load
from .tiny import ROOT

FAMILIES = ('upernet', 'cascade_mask_rcnn', 'transfer')
CONFIGS = sorted(
    p for family in FAMILIES
    for p in glob.glob(osp.join(ROOT, 'configs', family, '*.py')))
TLALIGN = [p for p in CONFIGS if '_tlalign-in1k-pre' in p]
# work_dirs/<the configs/tlalign/ run that made it>/epoch_<last>.pth
CKPT = re.compile(r'^work_dirs/(?P<pre>[^_/]+_[^_/]+-(?P<kind>tlalign|cutmix)'
                  r'_in1k)/epoch_(300|40)\.pth$')
# The B models follow the paper's protocol: TL-Align is the 40-epoch
# fine-tune of the official checkpoint, which is the CutMix twin's.
B_MODEL = re.compile(r'(deit|swin)-base')


def official_checkpoint(pre: str) -> str:
    """The official checkpoint the -ft40e fine-tune of ``pre`` starts from
    (its ``load_from``)."""
    return load(osp.join(ROOT, 'configs', 'tlalign',
                           f'{pre}.py')).load_from


def rel(path):
    return osp.relpath(path, ROOT)


@pytest.mark.parametrize('path', CONFIGS, ids=rel)
def test_strict_loader_from_a_pretraining_run(path):
    cfg = load(path)
    init = cfg.model.backbone.init_cfg
    assert init.type == 'Pretrained' and init._scope_ == SCOPE
    assert init.strict is True and init.prefix == 'backbone.'
    assert 'tlalign_mm.downstream' in cfg.custom_imports.imports
    kind = 'tlalign' if '_tlalign-in1k-pre' in path else 'cutmix'
    b_model = B_MODEL.search(osp.basename(path))
    if b_model and kind == 'cutmix':
        ours = load(path.replace('_cutmix-in1k-pre', '_tlalign-in1k-pre'))
        pre = CKPT.match(ours.model.backbone.init_cfg.checkpoint)['pre']
        assert init.checkpoint == official_checkpoint(pre)
        return
    match = CKPT.match(init.checkpoint)
    assert match, init.checkpoint
    assert match['kind'] == kind
    if b_model:
        assert '-ft40e-' in match['pre'], match['pre']
    pretrain = osp.join(ROOT, 'configs', 'tlalign', f"{match['pre']}.py")
    assert osp.isfile(pretrain), pretrain
    arch = cfg.model.backbone.arch
    assert match['pre'].split('_')[0].endswith(arch), (arch, match['pre'])


_PRETRAINED = {}


def pretrained_backbone(pretrain_config):
    """The ``backbone.*`` state dict of a real-size TL-Align classifier."""
    if pretrain_config not in _PRETRAINED:
        init_default_scope('mmpretrain')
        from mmpretrain.registry import MODELS as PRETRAIN_MODELS
        model = PRETRAIN_MODELS.build(load(pretrain_config).model)
        _PRETRAINED.clear()  # keep one in memory
        _PRETRAINED[pretrain_config] = {
            k[len('backbone.'):]: v
            for k, v in model.state_dict().items()
            if k.startswith('backbone.')
        }
    return _PRETRAINED[pretrain_config]


# one downstream config per distinct backbone (the transfer configs of one
# arch share theirs; cascade and upernet Swins differ in drop-path only)
STRUCTURES = [
    p for p in TLALIGN if 'transfer' not in p or p.endswith('_cifar10.py')
]


@pytest.mark.parametrize('path', sorted(STRUCTURES, key=lambda p: (
    CKPT.match(load(p).model.backbone.init_cfg.checkpoint)['pre'],
    p)), ids=rel)
def test_real_size_pretrained_backbone_loads_strictly(path):
    cfg = load(path)
    init = cfg.model.backbone.init_cfg
    pre = CKPT.match(init.checkpoint)['pre']
    state_dict = pretrained_backbone(
        osp.join(ROOT, 'configs', 'tlalign', f'{pre}.py'))
    init_default_scope(cfg.default_scope)
    backbone_cfg = cfg.model.backbone.copy()
    backbone_cfg.pop('init_cfg')
    backbone = MODELS.build(backbone_cfg)
    missing, unexpected, resized = load_strictly(
        backbone, dict(state_dict), pre, init.get('allow_missing', ()),
        init.get('allow_unexpected', ()))
    assert not unexpected
    if 'swin' in pre:
        assert sorted(missing) == [f'norm{i}.{p}' for i in range(3)
                                   for p in ('bias', 'weight')]
    else:
        assert not missing
    if 'upernet' in path and 'deit' in pre:
        assert resized == [('pos_embed', (1, 197, 384), (1, 1025, 384))]
    else:
        assert not resized
