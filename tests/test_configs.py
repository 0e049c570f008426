"""What the configs mean, as properties of their resolved dicts (each config
parsed once per session, :func:`tools.config_snapshot.load`):

- every TL-Align config is its CutMix twin plus the classifier
  (``model=dict(type='TLAlignClassifier')``, with the target or
  ``align_cfg`` an ablation names), every downstream TL-Align config its
  CutMix twin but for the pretrained checkpoint; the twins are found by
  name, and every TL-Align config has one, every CutMix config a TL-Align
  config;
- a CutMix twin on an mmpretrain config is that recipe unchanged.

The snapshot of every resolved dict is a developer tool for refactors, not
a test: ``.venv/bin/python tools/config_snapshot.py --check --ref main``."""
import glob
import os.path as osp
import re

import pytest
from mmengine.config import Config
from mmengine.utils import get_installed_path

from tlalign_mm.testing.configs import ROOT, load

CLASSIFICATION = ('tlalign', 'sl_vit', 'demo')
DOWNSTREAM = ('transfer', 'upernet', 'cascade_mask_rcnn')
# A classification config names its target where mmpretrain names its
# mixing, at the end of the training segment (resnet50_8xb32-cutmix_in1k):
# `-tlalign`, an ablation `-tlalign-<option>` or `-transmix`, after the
# mixing where it is not CutMix (`-resizemix-tlalign`). Its twin has the
# mixing there: `-cutmix` (or `-resizemix`).
TL_TAG = re.compile(r'(-resizemix)?-(tlalign(-[a-z]+)?|transmix)_')
CUTMIX_TAG = re.compile(r'-(cutmix|resizemix)_')
# A downstream config names the pretraining, as mmpretrain, mmseg and
# mmdet do (`_in21k-pre_`): `_tlalign-in1k-pre_` / `_cutmix-in1k-pre_`.
TL_PRE, CUTMIX_PRE = '_tlalign-in1k-pre_', '_cutmix-in1k-pre_'
# The paper's B protocol fine-tunes the official checkpoint, which is its
# baseline: no CutMix run to pair with.
NO_TWIN = re.compile(r'-ft40e-tlalign_')
MMPRETRAIN_AUGMENTS = ('Mixup', 'CutMix', 'ResizeMix')
CONFIGS = sorted(p for family in CLASSIFICATION + DOWNSTREAM for p in
                 glob.glob(osp.join(ROOT, 'configs', family, '*.py')))


def rel(path):
    return osp.relpath(path, ROOT)


def downstream(path):
    return osp.basename(osp.dirname(path)) in DOWNSTREAM


def is_tlalign(path):
    name = osp.basename(path)
    return TL_PRE in name if downstream(path) else bool(TL_TAG.search(name))


def is_cutmix(path):
    name = osp.basename(path)
    return CUTMIX_PRE in name if downstream(path) else bool(
        CUTMIX_TAG.search(name))


def twin_of(path):
    """The CutMix twin of a TL-Align config, by its name."""
    name = osp.basename(path)
    return osp.join(osp.dirname(path), name.replace(TL_PRE, CUTMIX_PRE)
                    if downstream(path) else TL_TAG.sub(
                        lambda m: (m[1] or '-cutmix') + '_', name, 1))


PAIRS = [p for p in CONFIGS
         if is_tlalign(p) and not NO_TWIN.search(osp.basename(p))]
MISSING = object()


def differences(a, b, path=()):
    """The dotted keys at which the resolved dicts ``a`` and ``b`` differ
    (list items by index)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return set().union(*(differences(a.get(k, MISSING),
                                         b.get(k, MISSING), path + (str(k), ))
                             for k in a.keys() | b.keys()))
    if isinstance(a, (list, tuple)) and type(a) is type(b) and \
            len(a) == len(b):
        return set().union(*(differences(x, y, path + (str(i), ))
                             for i, (x, y) in enumerate(zip(a, b))))
    return set() if type(a) is type(b) and a == b else {'.'.join(path)}


def test_every_tlalign_config_has_a_twin_and_every_twin_a_tlalign_config():
    tlalign = {p for p in CONFIGS if is_tlalign(p)}
    cutmix = {p for p in CONFIGS if is_cutmix(p)}
    assert not tlalign & cutmix
    assert set(CONFIGS) == tlalign | cutmix, 'a config of neither kind'
    assert {twin_of(p) for p in PAIRS} == cutmix
    assert {p for p in tlalign if NO_TWIN.search(p)} == {
        osp.join(ROOT, 'configs', 'tlalign', f'{arch}_16xb64-ft40e-tlalign_'
                 'in1k.py') for arch in ('deit-base', 'swin-base')}


@pytest.mark.parametrize('path', PAIRS, ids=rel)
def test_a_tlalign_config_is_its_twin_plus_the_classifier(path):
    ours, twin = load(path).to_dict(), load(twin_of(path)).to_dict()
    changed = differences(ours, twin)
    if downstream(path):  # the same fine-tune, from the other pretraining
        assert 'model.backbone.init_cfg.checkpoint' in changed
        assert changed <= {'model.backbone.init_cfg.checkpoint',
                           'model.backbone.init_cfg.hint'}, changed
        return
    assert changed <= {'model.type', 'model.target', 'model.align_cfg'}, \
        changed
    model, twin_model = ours['model'], twin['model']
    assert model['type'] == 'TLAlignClassifier'
    target = TL_TAG.search(osp.basename(path))[2]
    assert model.get('target', 'tlalign') == (
        'transmix' if target == 'transmix' else 'tlalign')
    if target.startswith('tlalign-'):  # an ablation: its option
        assert 'model.align_cfg' in changed
    # The twin: mmpretrain's classifier with its own augments, or, for an
    # augment mmpretrain has not (token CutMix, the DeiT paper recipe),
    # TLAlignClassifier itself on the area target.
    plain = {a['type'] for a in twin_model['train_cfg']['augments']} <= set(
        MMPRETRAIN_AUGMENTS)
    assert (twin_model['type'], twin_model.get('target')) == (
        ('ImageClassifier', None) if plain else ('TLAlignClassifier',
                                                 'cutmix'))


def unscoped(obj):
    """``obj`` without the ``_scope_`` keys a ``mmpretrain::`` base
    adds."""
    return {k: unscoped(v) for k, v in obj.items() if k != '_scope_'} \
        if isinstance(obj, dict) else type(obj)(map(unscoped, obj)) \
        if isinstance(obj, (list, tuple)) else obj


_RECIPE = re.compile(r"_base_ = \[\s*'mmpretrain::([^']+)'")
RECIPES = sorted(
    (p, m[1]) for p in CONFIGS if is_cutmix(p)
    for m in [_RECIPE.search(open(p).read())] if m)
LAST_CHECKPOINT = dict(type='LastCheckpointHook', _scope_='tlalign_mm',
                       interval=500)


@pytest.mark.parametrize('path,recipe', RECIPES,
                         ids=[rel(p) for p, _ in RECIPES])
def test_a_cutmix_twin_on_an_mmpretrain_config_is_its_recipe(path, recipe):
    """... unchanged, as its header says: the same dict but for this
    package's import, the resumable runtime (configs/_base_/
    resumable_runtime.py: last.pth every 500 iterations) and, where
    mmpretrain leaves it empty, the pretrained checkpoint."""
    ours = load(path).to_dict()
    theirs = Config.fromfile(osp.join(get_installed_path('mmpretrain'),
                                      '.mim', 'configs', recipe)).to_dict()
    changed = differences(unscoped(ours), theirs) - {
        'custom_imports', 'last_checkpoint_hook'}
    assert ours['custom_imports']['imports'] == ['tlalign_mm']
    if 'custom_hooks' in changed:  # the recipe has hooks of its own
        assert ours['custom_hooks'] == theirs['custom_hooks'] + [
            LAST_CHECKPOINT]
    else:
        assert ours['last_checkpoint_hook'] == dict(interval=500)
    checkpoint = 'model.backbone.init_cfg.checkpoint'
    if checkpoint in changed:
        assert theirs['model']['backbone']['init_cfg']['checkpoint'] == ''
    assert changed <= {'custom_hooks', checkpoint}, changed
