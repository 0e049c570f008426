"""Cascade Mask R-CNN on COCO from a TL-Align Swin-T: the real config
``configs/cascade_mask_rcnn/cascade-mask-rcnn_swin-tiny-p4-w7_tlalign-in1k-
pre_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py`` with the data root, image scale
(/10), iteration count and a tiny Swin (plus FPN/RoI head widths 256 -> 16)
changed (tests/downstream/tiny.py), trained 2 iterations through
``tools/train.py`` and tested through ``tools/test.py`` (bbox and segm COCO
metrics; the RCNN score threshold is 0 so that an untrained model has
detections to score) on a tiny COCO in its real layout (polygon masks);
the backbone a Runner builds from that config holds the pretrained tensors,
the new output norms of stages 1-3 being the only other keys."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config

import tlalign_mm.downstream  # noqa: F401
from tests.downstream import e2e
from tests.downstream.datasets import write_coco
from tests.downstream.tiny import (
    TINY_SWIN,
    config_path,
    dump,
    make_pretrain_checkpoint,
    shrink,
)

CONFIG = config_path(
    'cascade_mask_rcnn',
    'cascade-mask-rcnn_swin-tiny-p4-w7_tlalign-in1k-pre_fpn_4conv1fc-giou_'
    'amp-ms-crop-3x_coco.py')
PRETRAIN = config_path('tlalign', 'swin-tiny_16xb64-tlalign_in1k.py')
WIDTH = 16  # FPN and RoI head channels (256 in the real config)
NEW_NORMS = ['norm0.weight', 'norm0.bias', 'norm1.weight', 'norm1.bias',
             'norm2.weight', 'norm2.bias']


def tiny_cascade(cfg: Config, data_root: str, checkpoint: str) -> Config:
    e = TINY_SWIN['embed_dims']
    model = cfg.model
    model.backbone.arch = dict(TINY_SWIN)
    model.backbone.init_cfg.checkpoint = checkpoint
    model.neck.in_channels = [e, 2 * e, 4 * e, 8 * e]
    model.neck.out_channels = WIDTH
    model.rpn_head.in_channels = WIDTH
    model.rpn_head.feat_channels = WIDTH
    model.roi_head.bbox_roi_extractor.out_channels = WIDTH
    model.roi_head.mask_roi_extractor.out_channels = WIDTH
    for head in model.roi_head.bbox_head:
        head.in_channels = head.conv_out_channels = WIDTH
        head.fc_out_channels = WIDTH
    model.roi_head.mask_head.in_channels = WIDTH
    model.roi_head.mask_head.conv_out_channels = WIDTH
    ann = osp.join(data_root, 'annotations', 'instances_val2017.json')
    cfg.val_evaluator.ann_file = cfg.test_evaluator.ann_file = ann
    cfg.train_dataloader.batch_size = 1  # 2 images: 2 iterations
    cfg.train_cfg.max_epochs = 1
    # two iterations do not lift any class score over 0.05: keep them all,
    # so that the COCO bbox/segm evaluation has detections to score
    for stage_cfg in (model.test_cfg.rcnn, ):
        stage_cfg.score_thr = 0.0
    return cfg


@pytest.mark.e2e
def test_cascade_swin_tiny_from_tlalign_checkpoint(tmp_path):
    data = write_coco(str(tmp_path / 'coco'), n_train=2)
    pretrained = make_pretrain_checkpoint(PRETRAIN, str(tmp_path / 'pre.pth'),
                                          TINY_SWIN, img_size=32)
    n = sum(k.startswith('backbone.') for k in pretrained)
    cfg = Config.fromfile(CONFIG)
    assert cfg.model.backbone.init_cfg._scope_ == 'tlalign_mm'
    cfg = tiny_cascade(
        shrink(cfg, data, factor=10, work_dir=str(tmp_path / 'work')), data,
        str(tmp_path / 'pre.pth'))
    config = dump(cfg, str(tmp_path / 'cascade_tiny.py'))

    work = str(tmp_path / 'work')
    out = e2e.train(config, work)
    assert f'Loaded {n} tensors into SwinTransformer' in out
    assert 'new by design (allow_missing), left as initialised: ' \
        'norm0.bias, norm0.weight, norm1.bias' in out
    records = e2e.losses(work)
    assert [r['iter'] for r in records] == [1, 2]
    assert all(r['loss'] == r['loss'] for r in records)
    out = e2e.test(config, osp.join(work, 'epoch_1.pth'), work)
    assert 'coco/bbox_mAP' in out and 'coco/segm_mAP' in out

    backbone = e2e.built_backbone(cfg, str(tmp_path / 'inproc'))
    assert type(backbone).__name__ == 'SwinTransformer'
    assert e2e.assert_backbone_equals(backbone, pretrained,
                                      new_keys=NEW_NORMS) == n
    assert torch.equal(backbone.norm0.weight, torch.ones_like(
        backbone.norm0.weight))
