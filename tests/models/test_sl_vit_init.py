"""SPTLSAViTInit, the official SPT/LSA ViT initialisation, changes nothing
for a backbone that does not ask for it: the demo's SL-ViT initialises as
mmpretrain's VisionTransformer does."""
import os.path as osp

import torch
from mmengine import Config
from mmpretrain.models.backbones import VisionTransformer
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DEMO = osp.join(ROOT, 'configs', 'demo',
                'sl-vit-tiny-p4_1xb64-tlalign_digits.py')


def _demo_model():
    cfg = Config.fromfile(DEMO)
    model_cfg = cfg.model
    model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    assert model_cfg.backbone.type == 'SLViT'
    assert model_cfg.backbone.get('init_cfg') is None
    torch.manual_seed(0)
    return MODELS.build(model_cfg)


def test_demo_sl_vit_initialises_as_mmpretrains_vit():
    """SLViT.init_weights without the official init_cfg is
    VisionTransformer.init_weights, random draws included."""
    ours = _demo_model()
    ours.init_weights()
    reference = _demo_model()
    reference.backbone.init_weights = \
        VisionTransformer.init_weights.__get__(reference.backbone)
    reference.init_weights()
    got, want = ours.state_dict(), reference.state_dict()
    assert got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) for k in got)
