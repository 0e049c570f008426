# Test an ImageNet Swin-S checkpoint, TL-Align's or its CutMix twin's (the
# models are identical at test time), on ImageNet-C;
# reports imagenet_c/mCE (lower is better).
#   tools/test.py configs/robustness/swin-small_in1k_test-imagenet-c.py \
#       work_dirs/swin-small_16xb64-tlalign_in1k/epoch_300.pth
# Dataset and layout: configs/_base_/datasets/imagenet-c_test.py.
_base_ = [
    './_base_/swin-small_in1k.py',
    '../_base_/datasets/imagenet-c_test.py',
]

test_dataloader = {{_base_.robust_test_dataloader}}
test_evaluator = {{_base_.robust_test_evaluator}}
