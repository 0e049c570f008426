"""A TL-Align checkpoint flows into the real downstream configs: UperNet on
ADE20K (DeiT-S), Cascade Mask R-CNN on COCO (Swin-T), transfer to Stanford
Cars from the ``tools/export_backbone.py`` export (checked against the
config with ``--check``), and the BEiT-B fine-tune from a BEiT
pretraining checkpoint (``BEIT_PRE_CKPT``; one shared relative position
table, which the fine-tune's load hook copies into every block). Each is
trained through ``tools/train.py`` and tested through ``tools/test.py`` on
a tiny dataset in its real layout, with a tiny arch of its family
(tests/downstream/tiny.py); when training starts, the backbone holds the
pretrained tensors bit for bit (ViT's ``pos_embed`` resized by its load
hook, 2x2 -> 4x4 patches; a Swin's new output norms ``norm0``-``norm2``
the only other keys, as initialised).

Detection: the RCNN score threshold is 0, so that an untrained model has
detections for COCO's bbox and segm metrics to score."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmpretrain.models.utils import resize_pos_embed
from mmpretrain.registry import MODELS

import tlalign_mm.downstream  # noqa: F401
from tests.cli import export_cli
from tests.downstream.tiny import (
    TINY_SWIN,
    TINY_VIT,
    config_path,
    make_pretrain_checkpoint,
    run_tool,
    shrink,
)
from tlalign_mm.datasets import synthetic

DEIT_S = config_path('tlalign', 'deit-small_4xb256-tlalign_in1k.py')
WIDTH = 16  # FPN and RoI head channels (256 in the real config)
BEIT_ARCH = dict(embed_dims=32, num_layers=2, num_heads=2,
                 feedforward_channels=64)


def upernet(cfg, tmp_path, capsys):
    cfg.model.backbone.update(arch=dict(TINY_VIT), out_indices=(0, 1, 2, 3))
    cfg.model.neck.update(in_channels=[32] * 4, out_channels=32)
    cfg.model.decode_head.update(in_channels=[32] * 4, channels=32)
    cfg.model.auxiliary_head.update(in_channels=32, channels=16)
    cfg.train_cfg.update(max_iters=2, val_interval=1000)
    state = make_pretrain_checkpoint(DEIT_S, str(tmp_path / 'pre.pth'))
    return state.state_dict(), str(tmp_path / 'pre.pth'), 'iter_2.pth', 'mIoU'


def cascade(cfg, tmp_path, capsys):
    e, model = TINY_SWIN['embed_dims'], cfg.model
    model.backbone.arch = dict(TINY_SWIN)
    model.neck.update(in_channels=[e, 2 * e, 4 * e, 8 * e],
                      out_channels=WIDTH)
    model.rpn_head.update(in_channels=WIDTH, feat_channels=WIDTH)
    roi = model.roi_head
    roi.bbox_roi_extractor.out_channels = WIDTH
    roi.mask_roi_extractor.out_channels = WIDTH
    for head in roi.bbox_head:
        head.update(in_channels=WIDTH, conv_out_channels=WIDTH,
                    fc_out_channels=WIDTH)
    roi.mask_head.update(in_channels=WIDTH, conv_out_channels=WIDTH)
    ann = osp.join(cfg.val_dataloader.dataset.data_root, 'annotations',
                   'instances_val2017.json')
    cfg.val_evaluator.ann_file = cfg.test_evaluator.ann_file = ann
    cfg.train_dataloader.batch_size = 1  # 2 images: 2 iterations
    cfg.train_cfg.max_epochs = 1
    model.test_cfg.rcnn.score_thr = 0.0
    state = make_pretrain_checkpoint(
        config_path('tlalign', 'swin-tiny_16xb64-tlalign_in1k.py'),
        str(tmp_path / 'pre.pth'), dict(arch=TINY_SWIN, img_size=32))
    return (state.state_dict(), str(tmp_path / 'pre.pth'), 'epoch_1.pth',
            'coco/segm_mAP')


def transfer(cfg, tmp_path, capsys):
    cfg.model.backbone.arch = dict(TINY_VIT)
    cfg.model.head.in_channels = TINY_VIT['embed_dims']
    cfg.train_cfg.max_epochs = 1  # 4 images: 2 iterations
    raw, export = str(tmp_path / 'pre.pth'), str(tmp_path / 'backbone.pth')
    state = make_pretrain_checkpoint(DEIT_S, raw).state_dict()
    cfg.model.backbone.init_cfg.checkpoint = export
    cfg.dump(tmp_path / 'check.py')
    out = export_cli([raw, export, '--to', 'mmpretrain', '--check',
                      str(tmp_path / 'check.py')], capsys)
    assert 'loads' in out and 'strictly' in out
    return state, export, 'epoch_1.pth', 'accuracy/top1'


def beit(cfg, tmp_path, capsys):
    """The checkpoint as BEiT pretraining leaves it; 2 epochs of 2
    iterations, the recipe's warm-up in the first, its cosine after."""
    torch.manual_seed(0)
    backbone = MODELS.build(dict(
        type='BEiTViT', arch=BEIT_ARCH, img_size=32, patch_size=8,
        use_rel_pos_bias=False, use_shared_rel_pos_bias=True))
    state = {f'backbone.{k}': v + 0.1 * torch.randn_like(v) if
             v.is_floating_point() else v for k, v in
             backbone.state_dict().items()}
    torch.save(dict(state_dict=state), tmp_path / 'pre.pth')
    cfg.model.backbone.update(arch=BEIT_ARCH, patch_size=8)
    cfg.model.head.in_channels = BEIT_ARCH['embed_dims']
    cfg.train_cfg.max_epochs = 2
    warmup, cosine = cfg.param_scheduler
    warmup.end, cosine.begin, cosine.end = 1, 1, 2
    table = state['backbone.rel_pos_bias.relative_position_bias_table']
    state = {k: v for k, v in state.items() if 'relative_position' not in k}
    state.update({f'backbone.layers.{i}.attn.relative_position_bias_table':
                  table for i in range(BEIT_ARCH['num_layers'])})
    return state, str(tmp_path / 'pre.pth'), 'epoch_2.pth', 'accuracy/top1'


CASES = {  # the real config, its data, the image scale factor, the changes
    'upernet': ('upernet/upernet_deit-small-p16-ln-mln_tlalign-in1k-pre_'
                '8xb2-160k_ade20k-512x512.py', synthetic.write_ade20k, 8,
                upernet),
    'cascade': ('cascade_mask_rcnn/cascade-mask-rcnn_swin-tiny-p4-w7_tlalign'
                '-in1k-pre_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',
                lambda root: synthetic.write_coco(root, n_train=2), 10,
                cascade),
    'transfer': ('transfer/deit-small_tlalign-in1k-pre_8xb96-1000e_'
                 'stanford-cars.py', synthetic.write_stanford_cars, 7,
                 transfer),
    'beit': ('tlalign/beit-base-p16_8xb128-coslr-100e-tlalign_in1k.py',
             lambda root: synthetic.write_imagenet(root, n_train=4), 7,
             beit),
}


@pytest.mark.e2e
@pytest.mark.parametrize('case', list(CASES))
def test_a_tlalign_checkpoint_trains_and_tests_downstream(
        case, tmp_path, capsys, monkeypatch):
    config, write, factor, tiny_case = CASES[case]
    monkeypatch.setenv('BEIT_PRE_CKPT', str(tmp_path / 'pre.pth'))
    work = str(tmp_path / 'work')
    cfg = Config.fromfile(config_path(config))
    cfg = shrink(cfg, write(str(tmp_path / 'data')), factor, work)
    if case == 'beit':  # the variable a user sets
        assert cfg.model.backbone.init_cfg.checkpoint == str(
            tmp_path / 'pre.pth')
    pretrained, checkpoint, last, metric = tiny_case(cfg, tmp_path, capsys)
    cfg.model.backbone.init_cfg.checkpoint = checkpoint
    tiny = tmp_path / f'{case}.py'
    cfg.dump(tiny)

    run = run_tool('train.py', tiny, '--work-dir', work, '--no-validate')
    want = {k[len('backbone.'):]: v for k, v in pretrained.items()
            if k.startswith('backbone.')}
    if case == 'upernet':
        want['pos_embed'] = resize_pos_embed(want['pos_embed'], (2, 2),
                                             (4, 4), 'bicubic', 1)
    new = {f'norm{i}.{p}' for i in range(3) for p in ('weight', 'bias')
           } if case == 'cascade' else set()
    if case == 'beit':  # the fine-tune's own position indices and norms
        want = {k: v for k, v in want.items() if k in run.start}
    else:
        assert set(run.start) == set(want) | new
    for key, value in want.items():
        assert torch.equal(run.start[key], value), key
    for key in new:  # a LayerNorm as initialised
        assert torch.equal(run.start[key], torch.full_like(
            run.start[key], float(key.endswith('weight')))), key
    assert len(run.logs) == (4 if case == 'beit' else 2)
    assert all(log['loss'] == log['loss'] for log in run.logs)  # not NaN
    if case == 'beit':  # the target is TL-Align's
        assert max(log['label_drift/abs_diff'] for log in run.logs) > 0
    tested = run_tool('test.py', tiny, osp.join(work, last), '--work-dir',
                      work)
    assert any(key.endswith(metric) for key in tested.metrics), \
        tested.metrics
