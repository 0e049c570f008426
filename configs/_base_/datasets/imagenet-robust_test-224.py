# The test set-up shared by ImageNet-A, -R and -V2 (each sets its dataset
# and evaluator).
# For test configs of ImageNet classifiers (configs/robustness): they take
# robust_test_dataloader / robust_test_evaluator from here. The names are
# prefixed so that this file can sit beside a full ImageNet config in
# `_base_` (mmengine refuses keys defined by two bases). The test pipeline is
# the ImageNet one of the DeiT and Swin recipes (short edge 256, bicubic,
# centre crop 224).
robust_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='ResizeEdge',
        scale=256,
        edge='short',
        backend='pillow',
        interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
robust_test_dataloader = dict(
    _delete_=True,
    batch_size=64,
    num_workers=5,
    dataset=dict(pipeline=robust_test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
