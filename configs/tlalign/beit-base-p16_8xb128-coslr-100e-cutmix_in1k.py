# The CutMix twin: mmpretrain's BEiT-B ImageNet fine-tune unchanged
# (beit/benchmarks/beit-base-p16_8xb128-coslr-100e_in1k.py: 100 epochs, AdamW
# lr 4e-3 with layer decay 0.65, warm-up 20, Mixup 0.8 / CutMix 1.0 switched
# per batch, label smoothing 0.1, drop-path 0.1, relative position bias in
# every block, the mean patch token through ln2 to the head; 83.1 top-1 in
# mmpretrain's beit/metafile.yml). That recipe leaves its checkpoint empty
# (init_cfg.checkpoint=''); here it is BEIT_PRE_CKPT, by default mmpretrain's
# self-supervised BEiT-B (beit_beit-base-p16_8xb256-amp-coslr-300e_in1k):
#   wget -P checkpoints https://download.openmmlab.com/mmselfsup/1.x/beit/beit_vit-base-p16_8xb256-amp-coslr-300e_in1k/beit_vit-base-p16_8xb256-amp-coslr-300e_in1k_20221128-ab79e626.pth
# Compare with beit-base-p16_8xb128-coslr-100e-tlalign_in1k.py, which differs
# only in the target.
_base_ = [
    'mmpretrain::beit/benchmarks/beit-base-p16_8xb128-coslr-100e_in1k.py',
    '../_base_/resumable_runtime.py',  # last.pth every 500 iters
]
custom_imports = dict(imports=['tlalign_mm'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='{{$BEIT_PRE_CKPT:checkpoints/beit_vit-base-p16_8xb256-amp-coslr-300e_in1k_20221128-ab79e626.pth}}')))  # noqa: E501
