# ImageNet-C (Hendrycks & Dietterich 2019): the validation set under 15
# corruptions x 5 severities; mCE normalised by AlexNet (CorruptionError).
# The images are already 224x224 (resized and centre-cropped by the
# benchmark), so the pipeline only centre-crops, as the benchmark's own
# evaluation does.
# Layout:
# data/imagenet-c/<corruption>/<1..5>/<wnid>/*.JPEG
# For test configs of ImageNet classifiers (configs/robustness): they take
# robust_test_dataloader / robust_test_evaluator from here. The names are
# prefixed so that this file can sit beside a full ImageNet config in
# `_base_` (mmengine refuses keys defined by two bases). The test pipeline is
# the benchmark's: a centre crop of the 224x224 images.
robust_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs',
         meta_keys=('sample_idx', 'img_path', 'ori_shape', 'img_shape',
                    'corruption', 'severity')),
]
robust_test_dataloader = dict(
    _delete_=True,
    batch_size=64,
    num_workers=5,
    dataset=dict(
        type='ImageNetC',
        data_root='data/imagenet-c',
        pipeline=robust_test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
robust_test_evaluator = dict(_delete_=True, type='CorruptionError')
