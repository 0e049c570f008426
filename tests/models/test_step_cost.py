"""A TL-Align training step reads no tensor value back to the host.

(The operations it adds per block are a report, not a test:
``tools/benchmark.py --model deit-small --ops-only``.)"""
import copy

import pytest
import torch
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import tlalign_mm  # noqa: F401
from tools.cost import step_cost

# DeiT-S's and Swin-T's paths, narrowed: DeiT-S's 64-wide heads (the SDPA
# path of head-mean attention), two blocks; Swin-T's geometry at 224 (four
# stages, shifted windows, no padded window, as in training), 16 wide.
MODELS_ = {
    'deit-small': dict(
        backbone=dict(type='VisionTransformer', arch=dict(
            embed_dims=128, num_layers=2, num_heads=2,
            feedforward_channels=256), img_size=32, patch_size=16,
            drop_path_rate=0.1),
        head=dict(type='VisionTransformerClsHead', in_channels=128),
        side=32),
    'swin-tiny': dict(
        backbone=dict(type='SwinTransformer', arch=dict(
            embed_dims=16, depths=[2, 2, 2, 2], num_heads=[1, 1, 2, 2]),
            img_size=224, drop_path_rate=0.2),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', in_channels=128),
        side=224),
}


def build(name):
    spec = copy.deepcopy(MODELS_[name])
    spec.pop('side')
    torch.manual_seed(0)
    model = MODELS.build(dict(
        type='TLAlignClassifier',
        data_preprocessor=dict(
            num_classes=10,
            batch_augments=dict(augments=[dict(type='TLCutMix', alpha=1.0)])),
        head=dict(spec.pop('head'), num_classes=10), **spec))
    model.train()
    return model


def batch_for(model, side, batch_size=2):
    data = dict(
        inputs=[torch.full((3, side, side), i * 40, dtype=torch.uint8)
                for i in range(batch_size)],
        data_samples=[DataSample().set_gt_label(i)
                      for i in range(batch_size)])
    torch.manual_seed(1)
    return model.data_preprocessor(data, training=True)


@pytest.mark.parametrize('name', list(MODELS_))
def test_a_traced_step_reads_no_tensor_value_on_the_host(name):
    model = build(name)
    _, syncs = step_cost(model, batch_for(model, MODELS_[name]['side']))
    assert syncs.calls == []
