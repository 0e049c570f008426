# ImageNetV2 MatchedFrequency (Recht et al. 2019): 10,000 new test images
# of the 1000 classes; top-1/top-5. Folders are class indices.
# Layout:
# data/imagenetv2-matched-frequency-format-val/{0..999}/*.jpeg
# Test set-up (pipeline, loader): imagenet-robust_test-224.py.
_base_ = ['./imagenet-robust_test-224.py']
robust_test_dataloader = dict(
    dataset=dict(
        type='ImageNetV2',
        data_root='data/imagenetv2-matched-frequency-format-val'))
robust_test_evaluator = dict(_delete_=True, type='Accuracy', topk=(1, 5))
