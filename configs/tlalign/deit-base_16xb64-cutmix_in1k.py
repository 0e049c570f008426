# The CutMix twin: mmpretrain's DeiT-Base recipe unchanged (300 epochs,
# AdamW, Mixup 0.8 / CutMix 1.0 switched per batch, label smoothing 0.1).
# Compare with deit-base_16xb64-tlalign_in1k.py, which differs only in the target.
_base_ = ['mmpretrain::deit/deit-base_16xb64_in1k.py']
custom_imports = dict(imports=['tlalign_mm'], allow_failed_imports=False)
# ../_base_/resumable_runtime.py (last.pth every 500 iterations), listed
# here: mmpretrain's DeiT-B already sets custom_hooks (its EMA), and mmengine
# refuses a key that two bases both set.
custom_hooks = [
    dict(type='EMAHook', momentum=4e-5, priority='ABOVE_NORMAL'),
    dict(type='LastCheckpointHook', _scope_='tlalign_mm',
         interval=500),
]
