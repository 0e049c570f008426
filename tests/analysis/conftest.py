"""Shared fixtures of the analysis-tool tests: the digits demo's tiny ViT
(with sharpened attention, so alignment moves labels), a tiny Swin on the
same data, and an in-process runner for the scripts in tools/analysis/."""
import functools
import os.path as osp
from types import SimpleNamespace

import pytest
import torch

from tests.cli import tool_main
from tlalign_mm.analysis import session

DEMO = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))),
                'configs', 'demo', 'vit-tiny-p4_1xb64-{}_digits.py')
VIT_CONFIG = DEMO.format('tlalign')
# No pickling of the dataset (its gc.collect() costs seconds in a big heap).
NO_SERIALIZE = 'test_dataloader.dataset.serialize_data=False'
# 8 test images in one batch: every tool runs one small batch.
FEW = ['--num-images', '8', '--batch-size', '8', '--cfg-options',
       NO_SERIALIZE]
SWIN = f'''_base_ = [{DEMO.format('cutmix')!r}]
model = dict(_delete_=True, type='ImageClassifier', backbone=dict(
    type='SwinTransformer', arch=dict(embed_dims=16, depths=[2, 2],
    num_heads=[2, 2]), img_size=16, window_size=2, out_indices=(1, )),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(type='LinearClsHead', num_classes=10, in_channels=32))'''


def sharpen(model, factor=4.0):
    """Scale every query/key projection: peaked attention that moves
    labels, as a trained model's does."""
    with torch.no_grad():
        for module in model.modules():
            qkv = getattr(module, 'qkv', None)
            if isinstance(qkv, torch.nn.Linear):  # queries and keys
                qkv.weight[:2 * qkv.out_features // 3] *= factor
    return model


def setup(config, checkpoint):
    """A config, its model (sharpened, eval) saved as a checkpoint, and a
    dataloader of batches of 8 test images."""
    cfg = session.load_config(config, {NO_SERIALIZE.split('=')[0]: False})
    model = sharpen(session.build_model(cfg, None, seed=0))
    torch.save({'state_dict': model.state_dict()}, checkpoint)
    return SimpleNamespace(cfg=cfg, model=model, paths=(config, checkpoint),
                           loader=session.build_dataloader(cfg, batch_size=8))


@pytest.fixture(scope='session')
def setups(tmp_path_factory):
    """``{'vit': ..., 'swin': ...}``: the demo's ViT, a tiny Swin."""
    root = tmp_path_factory.mktemp('analysis_models')
    (root / 'swin.py').write_text(SWIN)
    return dict(vit=setup(VIT_CONFIG, str(root / 'vit.pth')),
                swin=setup(str(root / 'swin.py'), str(root / 'swin.pth')))


@pytest.fixture(scope='session')
def run_tool():
    """``run_tool(name, argv)``: ``tools/analysis/<name>.py``'s ``main``."""
    main = functools.cache(lambda name: tool_main(f'analysis/{name}.py'))
    return lambda name, argv: main(name)([str(a) for a in argv])
