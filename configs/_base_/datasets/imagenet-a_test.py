# ImageNet-A (Hendrycks et al. 2021): 7,500 natural adversarial examples of
# 200 ImageNet classes; top-1 with the 1000-way prediction restricted to the
# 200 classes (SubsetAccuracy), the standard protocol.
# Layout:
# data/imagenet-a/n01498041/*.jpg ... (200 WordNet-id folders)
# Test set-up (pipeline, loader): imagenet-robust_test-224.py.
_base_ = ['./imagenet-robust_test-224.py']
robust_test_dataloader = dict(
    dataset=dict(
        type='ImageNetA',
        data_root='data/imagenet-a'))
robust_test_evaluator = dict(_delete_=True, type='SubsetAccuracy', topk=(1, ))
