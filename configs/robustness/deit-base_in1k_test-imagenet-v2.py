# Test an ImageNet DeiT-B checkpoint, TL-Align's or its CutMix twin's (the
# models are identical at test time), on ImageNetV2;
# reports accuracy/top1.
#   tools/test.py configs/robustness/deit-base_in1k_test-imagenet-v2.py \
#       work_dirs/deit-base_16xb64-ft40e-tlalign_in1k/epoch_40.pth
# Dataset and layout: configs/_base_/datasets/imagenet-v2_test.py.
_base_ = [
    './_base_/deit-base_in1k.py',
    '../_base_/datasets/imagenet-v2_test.py',
]

test_dataloader = {{_base_.robust_test_dataloader}}
test_evaluator = {{_base_.robust_test_evaluator}}
