# Test an ImageNet Swin-T checkpoint, TL-Align's or its CutMix twin's (the
# models are identical at test time), on ImageNetV2;
# reports accuracy/top1.
#   tools/test.py configs/robustness/swin-tiny_in1k_test-imagenet-v2.py \
#       work_dirs/swin-tiny_16xb64-tlalign_in1k/epoch_300.pth
# Dataset and layout: configs/_base_/datasets/imagenet-v2_test.py.
_base_ = [
    './_base_/swin-tiny_in1k.py',
    '../_base_/datasets/imagenet-v2_test.py',
]

test_dataloader = {{_base_.robust_test_dataloader}}
test_evaluator = {{_base_.robust_test_evaluator}}
