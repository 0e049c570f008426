"""Every downstream config loads its backbone with the strict loader from a
TL-Align (or, in its twin, CutMix) ImageNet checkpoint of this repository
(for DeiT-B and Swin-B the paper's protocol: the 40-epoch TL-Align
fine-tune of the official checkpoint, and the official checkpoint itself;
that the twins differ only in it: tests/test_configs.py) of the same arch
(that the tiny arch's pretraining checkpoint loads strictly into each
family's real downstream config: tests/e2e/test_downstream.py)."""
import glob
import os.path as osp
import re

import pytest

import tlalign_mm.downstream  # noqa: F401
from tlalign_mm.registry import SCOPE
from tlalign_mm.testing.configs import load

from .tiny import ROOT

CONFIGS = sorted(p for family in ('upernet', 'cascade_mask_rcnn', 'transfer')
                 for p in glob.glob(osp.join(ROOT, 'configs', family, '*.py')))
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
