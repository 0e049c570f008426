# Fine-tune a DeiT-S pretrained on ImageNet with TL-Align on CIFAR-10
# at 224x224: DeiT's transfer recipe (configs/_base_/schedules/
# deit-ft_sgd-bs768-1000e.py). Fine-tuning is plain (an ImageClassifier with
# Mixup/CutMix as in DeiT); only the pretraining differs from the twin
# deit-small_cutmix-in1k-pre_8xb96-1000e_cifar10.py.
#
# The backbone loads strictly (every key, or an error) from TLALIGN_CKPT,
# by default the last checkpoint of
#   tools/train.py configs/tlalign/deit-small_4xb256_in1k_tlalign.py
# (a Runner checkpoint, or its tools/export_backbone.py export):
#   TLALIGN_CKPT=path/to/ckpt.pth tools/dist_train.sh <this config> 8
_base_ = [
    '../_base_/datasets/cifar10_bs96_deit-ft-224.py',
    '../_base_/schedules/deit-ft_sgd-bs768-1000e.py',
    'mmpretrain::_base_/default_runtime.py',
]
custom_imports = dict(
    imports=['tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/deit-small_4xb256_in1k_tlalign/epoch_300.pth}}'  # noqa: E501
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='VisionTransformer',
        arch='deit-small',
        img_size=224,
        patch_size=16,
        drop_path_rate=0.0,  # DeiT's transfer recipe: no stochastic depth
        # the strict loader of tlalign_mm.downstream (not mmengine's):
        # strict=True makes a config that loses `_scope_` fail loudly
        init_cfg=dict(
            type='Pretrained',
            _scope_='tlalign_mm.downstream',
            checkpoint=checkpoint_file,
            prefix='backbone.',
            strict=True)),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=10,
        in_channels=384,
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0),
    ]),
)
default_hooks = dict(
    checkpoint=dict(type='CheckpointHook', interval=50, max_keep_ckpts=2))
