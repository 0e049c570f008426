"""Every downstream config loads its backbone with the strict loader from a
TL-Align (or, in its twin, CutMix) ImageNet checkpoint of this repository
(for DeiT-B and Swin-B the paper's protocol: the 40-epoch TL-Align
fine-tune of the official checkpoint, and the official checkpoint itself;
that the twins differ only in it: tests/test_configs.py), and the real-size
backbone of each pretraining config loads strictly into the real-size
backbone of each downstream config (one per family and
task)."""
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

CONFIGS = sorted(p for family in ('upernet', 'cascade_mask_rcnn', 'transfer')
                 for p in glob.glob(osp.join(ROOT, 'configs', family, '*.py')))
TLALIGN = [p for p in CONFIGS if '_tlalign-in1k-pre' in p]
# work_dirs/<the configs/tlalign/ run that made it>/epoch_<last>.pth
CKPT = re.compile(r'^work_dirs/(?P<pre>[^_/]+_[^_/]+-(?P<kind>tlalign|cutmix)'
                  r'_in1k)/epoch_(300|40)\.pth$')
# The B models follow the paper's protocol: TL-Align is the 40-epoch
# fine-tune of the official checkpoint, which is the CutMix twin's.
B_MODEL = re.compile(r'(deit|swin)-base')


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
        # the official checkpoint the -ft40e fine-tune starts from
        assert init.checkpoint == load(osp.join(
            ROOT, 'configs', 'tlalign', f'{pre}.py')).load_from
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


# one per family and task: the Swins of UperNet and Cascade, the ViTs of
# each size, differ in drop-path only
STRUCTURES = [p for p in TLALIGN if re.search(
    'upernet_deit-small|cascade-mask-rcnn_swin-tiny|deit-tiny.*cifar10.py', p)]


@pytest.mark.e2e  # real-size models
@pytest.mark.parametrize('path', STRUCTURES, ids=rel)
def test_real_size_pretrained_backbone_loads_strictly(path):
    """The real-size backbone of the pretraining config loads strictly into
    the real-size backbone of the downstream config (the only resize:
    ViT's pos_embed, 14x14 -> 32x32 patches at 512)."""
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS
    cfg = load(path)
    init = cfg.model.backbone.init_cfg
    pre = CKPT.match(init.checkpoint)['pre']
    init_default_scope('mmpretrain')
    state_dict = {k[len('backbone.'):]: v for k, v in PRETRAIN_MODELS.build(
        load(osp.join(ROOT, 'configs', 'tlalign', f'{pre}.py')).model
    ).state_dict().items() if k.startswith('backbone.')}
    init_default_scope(cfg.default_scope)
    backbone = MODELS.build(dict(cfg.model.backbone, init_cfg=None))
    missing, unexpected, resized = load_strictly(
        backbone, state_dict, pre, init.get('allow_missing', ()),
        init.get('allow_unexpected', ()))
    assert not unexpected
    assert sorted(missing) == ([f'norm{i}.{p}' for i in range(3) for p in (
        'bias', 'weight')] if 'swin' in pre else [])
    assert resized == ([('pos_embed', (1, 197, 384), (1, 1025, 384))]
                       if 'upernet' in path else [])
