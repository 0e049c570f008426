# Fine-tune a DeiT-B pretrained on ImageNet with TL-Align on CIFAR-100
# at 224x224: DeiT's transfer recipe (configs/_base_/schedules/
# deit-ft_sgd-bs768-1000e.py). Fine-tuning is plain (an ImageClassifier with
# Mixup/CutMix as in DeiT); only the pretraining differs from the twin
# deit-base_cutmix-in1k-pre_8xb96-1000e_cifar100.py.
#
# The backbone loads strictly from TLALIGN_CKPT (see the model base):
#   TLALIGN_CKPT=path/to/ckpt.pth tools/dist_train.sh <this config> 8
_base_ = [
    '../_base_/datasets/cifar100_bs96_deit-ft-224.py',
    '../_base_/schedules/deit-ft_sgd-bs768-1000e.py',
    'mmpretrain::_base_/default_runtime.py',
    '../_base_/models/deit-base_tlalign-in1k-pre_ft.py',
]
model = dict(head=dict(num_classes=100))
default_hooks = dict(
    checkpoint=dict(type='CheckpointHook', interval=50, max_keep_ckpts=2))
