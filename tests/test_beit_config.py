"""The BEiT-B fine-tune twins are mmpretrain's recipe with the named
changes only (docs/recipes.md, "BEiT")."""
import os.path as osp

from mmengine.config import Config
from mmengine.utils import get_installed_path
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401
from tlalign_mm.models.recorders import BEiTRecorder, get_recorder

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
NAME = 'beit-base-p16_8xb128-coslr-100e_in1k'
OURS = osp.join(ROOT, 'configs', 'tlalign', 'beit-base-p16_8xb128-coslr-100e-cutmix_in1k.py')
ORIGINAL = osp.join(get_installed_path('mmpretrain'), '.mim', 'configs',
                    'beit', 'benchmarks', f'{NAME}.py')
CKPT = ('checkpoints/beit_vit-base-p16_8xb256-amp-coslr-300e_in1k_'
        '20221128-ab79e626.pth')


def unscoped(obj):
    """``obj`` without the ``_scope_`` keys a ``mmpretrain::`` base
    adds."""
    if isinstance(obj, dict):
        return {k: unscoped(v) for k, v in obj.items() if k != '_scope_'}
    if isinstance(obj, (list, tuple)):
        return type(obj)(unscoped(v) for v in obj)
    return obj


def test_cutmix_twin_is_mmpretrains_recipe_with_the_checkpoint():
    ours = unscoped(Config.fromfile(OURS).to_dict())
    theirs = Config.fromfile(ORIGINAL).to_dict()
    init = ours['model']['backbone']['init_cfg']
    assert theirs['model']['backbone']['init_cfg'] == dict(
        init, checkpoint='')
    assert init['checkpoint'] == CKPT
    ours['model']['backbone']['init_cfg']['checkpoint'] = ''
    added = {'custom_imports', 'last_checkpoint_hook', 'filename'}
    assert set(ours) - set(theirs) <= added
    assert {k: v for k, v in ours.items() if k not in added} == \
        {k: v for k, v in theirs.items() if k != 'filename'}


def test_tlalign_twin_builds_and_records_a_tiny_beit():
    cfg = Config.fromfile(OURS.replace('-cutmix_', '-tlalign_')).model
    cfg.backbone.update(arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                                  feedforward_channels=64), img_size=32)
    cfg.head.in_channels = 32
    model = MODELS.build(cfg)
    assert type(model.backbone).__name__ == 'BEiTViT'
    assert type(get_recorder(model.backbone)) is BEiTRecorder
    assert model.data_preprocessor.batch_augments is not None
