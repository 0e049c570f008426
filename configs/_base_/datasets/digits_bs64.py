# scikit-learn's handwritten digits (ships with the package: no download),
# upsampled from 8x8 to 16x16. A seeded, stratified 80/20 hold-out split.
dataset_type = 'Digits'
data_preprocessor = dict(
    num_classes=10,
    mean=[127.5, 127.5, 127.5],
    std=[127.5, 127.5, 127.5],
    to_rgb=False,
)

train_pipeline = [
    dict(type='Resize', scale=(16, 16), interpolation='bilinear'),
    dict(type='RandomCrop', crop_size=16, padding=1),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='Resize', scale=(16, 16), interpolation='bilinear'),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=64,
    num_workers=0,
    dataset=dict(type=dataset_type, split='train', pipeline=train_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=0,
    dataset=dict(type=dataset_type, split='test', pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
