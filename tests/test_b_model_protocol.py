"""The paper's B-model protocol: DeiT-B and Swin-B TL-Align models are
40-epoch fine-tunes of the official checkpoints, which are the baselines;
the downstream configs default to those files and say how to get them."""
import os.path as osp

import pytest
import torch

from .test_paper_configs import load


# ------------------------------------------------- B models, the protocol ---
@pytest.mark.parametrize('arch,official', [
    ('deit-base', 'checkpoints/deit-base_3rdparty_pt-16xb64_in1k_20211124-'
     '6f40c188.pth'),
    ('swin-base', 'checkpoints/swin_base_patch4_window7_224-4670dd19.pth'),
])
def test_b_model_fine_tune_protocol(arch, official):
    cfg = load(f'tlalign/{arch}_16xb64-ft40e-tlalign_in1k.py')
    assert cfg.load_from == official
    assert cfg.optim_wrapper.optimizer.lr == 1e-5
    assert cfg.optim_wrapper.optimizer.weight_decay == 1e-8
    assert [s.type for s in cfg.param_scheduler] == ['ConstantLR']
    assert cfg.train_cfg.max_epochs == 40
    assert cfg.model.align_cfg.follow_drop_path is False
    assert 16 * cfg.train_dataloader.batch_size == 1024
    # 1e-5 is the optimiser's lr at 1024 images, i.e. after the originals'
    # lr x batch / 512 scaling (main_tla.py:316-317, Swin main.py:327)
    assert cfg.auto_scale_lr.base_batch_size == 1024
    assert cfg.train_dataloader.drop_last is True
    if arch == 'deit-base':  # the official code's recipe, as --finetune
        assert cfg.model.train_cfg.augments[0].type == 'TLTokenCutMix'
        assert cfg.model.backbone.drop_path_rate == 0.0


B_DOWNSTREAM = [
    ('upernet/upernet_swin-base-p4-w7_{}-in1k-pre_8xb2-160k_ade20k-'
     '512x512.py', 'swin', 'SWIN_B_CKPT'),
    ('cascade_mask_rcnn/cascade-mask-rcnn_swin-base-p4-w7_{}-in1k-pre_fpn_'
     '4conv1fc-giou_amp-ms-crop-3x_coco.py', 'swin', 'SWIN_B_CKPT'),
] + [(f'transfer/deit-base_{{}}-in1k-pre_8xb96-1000e_{d}.py', 'deit',
      'DEIT_B_CKPT')
     for d in ('cifar10', 'cifar100', 'flowers102', 'stanford-cars')]


@pytest.mark.parametrize('path,arch,variable', B_DOWNSTREAM,
                         ids=lambda p: osp.basename(str(p)))
def test_b_model_downstream_checkpoints(path, arch, variable):
    ours = load(path.format('tlalign')).model.backbone.init_cfg
    twin = load(path.format('cutmix')).model.backbone.init_cfg
    assert ours.checkpoint == \
        f'work_dirs/{arch}-base_16xb64-ft40e-tlalign_in1k/epoch_40.pth'
    ft = load(f'tlalign/{arch}-base_16xb64-ft40e-tlalign_in1k.py')
    assert twin.checkpoint == ft.load_from  # the official checkpoint
    assert 'TLALIGN_CKPT' in ours.hint and \
        f'configs/tlalign/{arch}-base_16xb64-ft40e-tlalign_in1k.py' in \
        ours.hint
    assert variable in twin.hint and 'wget' in twin.hint


@pytest.mark.parametrize('kind', ['tlalign', 'cutmix'])
def test_a_missing_b_checkpoint_names_its_variable_and_command(kind):
    from mmengine.registry import WEIGHT_INITIALIZERS

    import tlalign_mm.downstream  # noqa: F401
    from tlalign_mm.checkpoint import CheckpointMismatchError
    path = B_DOWNSTREAM[2][0].format(kind)
    init = dict(load(path).model.backbone.init_cfg)
    assert not osp.exists(init['checkpoint'])
    init['checkpoint'] = 'checkpoints/does-not-exist.pth'
    initializer = WEIGHT_INITIALIZERS.build(init)
    with pytest.raises(CheckpointMismatchError) as error:
        initializer(torch.nn.Linear(1, 1))
    message = str(error.value)
    assert 'does-not-exist.pth' in message
    if kind == 'tlalign':
        assert 'TLALIGN_CKPT' in message and 'tools/dist_train.sh ' \
            'configs/tlalign/deit-base_16xb64-ft40e-tlalign_in1k.py' in message
    else:
        assert 'DEIT_B_CKPT' in message and 'wget -P checkpoints' in message
