# scikit-learn's handwritten digits (ships with the package: no download),
# upsampled from 8x8 to 16x16. A seeded, stratified 80/20 hold-out split.
#
# The dataset upsamples every image once when it loads (`scale`, the bytes
# the `Resize(scale=(16, 16), interpolation='bilinear')` transform gave), and
# with these pipelines (RandomCrop with padding then PackInputs; PackInputs)
# it makes each batch at once from one image tensor (`Digits.__getitems__`:
# the samples and random draws of the per-sample pipeline, about 1/4 of its
# time). The data list stays a Python list (`serialize_data=False`:
# mmengine's serialisation only saves memory across dataloader workers, and
# there are none; it costs a pickle load per sample and a gc.collect per
# build).
dataset_type = 'Digits'
data_preprocessor = dict(
    num_classes=10,
    mean=[127.5, 127.5, 127.5],
    std=[127.5, 127.5, 127.5],
    to_rgb=False,
)

train_pipeline = [
    dict(type='RandomCrop', crop_size=16, padding=1),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=64,
    num_workers=0,
    dataset=dict(
        type=dataset_type,
        split='train',
        scale=16,
        serialize_data=False,
        pipeline=train_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=0,
    dataset=dict(
        type=dataset_type,
        split='test',
        scale=16,
        serialize_data=False,
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
