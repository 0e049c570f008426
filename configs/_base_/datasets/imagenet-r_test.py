# ImageNet-R (Hendrycks et al. 2021): 30,000 renditions (art, cartoons,
# sketches, ...) of 200 ImageNet classes; top-1 restricted to the 200
# classes (SubsetAccuracy).
# Layout:
# data/imagenet-r/n01443537/*.jpg ... (200 WordNet-id folders)
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
    dataset=dict(
        type='ImageNetR',
        data_root='data/imagenet-r',
        pipeline=robust_test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
robust_test_evaluator = dict(_delete_=True, type='SubsetAccuracy', topk=(1, ))
