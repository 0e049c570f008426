# Test an ImageNet DeiT-S checkpoint, TL-Align's or its CutMix twin's (the
# models are identical at test time), on ImageNet-A;
# reports subset_accuracy/top1.
#   tools/test.py configs/robustness/deit-small_in1k_test-imagenet-a.py \
#       work_dirs/deit-small_4xb256_in1k_tlalign/epoch_300.pth
# Dataset and layout: configs/_base_/datasets/imagenet-a_test.py.
_base_ = [
    '../tlalign/deit-small_4xb256_in1k_cutmix.py',
    '../_base_/datasets/imagenet-a_test.py',
]
custom_imports = dict(
    imports=['tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

test_dataloader = {{_base_.robust_test_dataloader}}
test_evaluator = {{_base_.robust_test_evaluator}}
