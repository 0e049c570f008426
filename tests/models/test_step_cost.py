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

# Real DeiT-S and Swin-T (the number of operations does not depend on the
# batch; Swin-T at 224 has no padded window, as in training).
MODELS_ = {
    'deit-small': dict(
        backbone=dict(type='VisionTransformer', arch='deit-small',
                      img_size=32, patch_size=16, drop_path_rate=0.1),
        head=dict(type='VisionTransformerClsHead', in_channels=384),
        side=32),
    'swin-tiny': dict(
        backbone=dict(type='SwinTransformer', arch='tiny', img_size=224,
                      drop_path_rate=0.2),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', in_channels=768),
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
