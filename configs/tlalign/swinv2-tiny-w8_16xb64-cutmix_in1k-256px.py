# The CutMix twin: mmpretrain's SwinV2-Tiny (window 8, 256px) recipe
# unchanged (300 epochs, AdamW, Mixup 0.8 / CutMix 1.0 switched per batch,
# label smoothing 0.1, drop-path 0.2). Compare with
# swinv2-tiny-w8_16xb64-tlalign_in1k-256px.py, which differs only in the
# target.
_base_ = [
    'mmpretrain::swin_transformer_v2/swinv2-tiny-w8_16xb64_in1k-256px.py',
    '../_base_/resumable_runtime.py',  # last.pth every 500 iters
]
custom_imports = dict(imports=['tlalign_mm'], allow_failed_imports=False)
