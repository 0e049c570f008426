# ImageNet-R (Hendrycks et al. 2021): 30,000 renditions (art, cartoons,
# sketches, ...) of 200 ImageNet classes; top-1 restricted to the 200
# classes (SubsetAccuracy).
# Layout:
# data/imagenet-r/n01443537/*.jpg ... (200 WordNet-id folders)
# Test set-up (pipeline, loader): imagenet-robust_test-224.py.
_base_ = ['./imagenet-robust_test-224.py']
robust_test_dataloader = dict(
    dataset=dict(
        type='ImageNetR',
        data_root='data/imagenet-r'))
robust_test_evaluator = dict(_delete_=True, type='SubsetAccuracy', topk=(1, ))
