# The CutMix twin: mmpretrain's Swin-Tiny recipe unchanged (300 epochs, AdamW,
# Mixup 0.8 / CutMix 1.0 switched per batch, label smoothing 0.1, drop-path).
# Compare with swin-tiny_16xb64-tlalign_in1k.py, which differs only in the target.
_base_ = [
    'mmpretrain::swin_transformer/swin-tiny_16xb64_in1k.py',
    '../_base_/resumable_runtime.py',  # last.pth every 500 iters
]
custom_imports = dict(imports=['tlalign_mm'], allow_failed_imports=False)
