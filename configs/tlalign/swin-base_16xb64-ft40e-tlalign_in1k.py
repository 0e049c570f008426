# The paper's Swin-B protocol: a 40-epoch TL-Align fine-tune of the official
# Swin-B, whose own accuracy is the baseline (the paper's 83.5 -> 83.7
# top-1, official README of Euphoria16/TL-Align). 40 epochs, constant lr
# 1e-5, weight decay 1e-8: this project's issues 4 and 12, which read them
# from the paper. The lr 1e-5 is the optimiser's lr at the total batch of 16
# x 64 = 1024, i.e. after Swin's main.py:327 scaling (lr x batch x world
# / 512); it is the paper's number as stated, taken as the lr the optimiser
# uses. Had the paper meant the command-line --lr before that scaling, the
# optimiser's lr would be 2e-5 (docs/recipes.md). With --auto-scale-lr,
# mmengine scales 1e-5 from base_batch_size 1024. The rest is Swin-B's
# recipe as the paper-recipe Swin configs use it
# (swin-tiny_16xb64-amp-paper-tlalign_in1k.py: mmpretrain's port of
# microsoft/Swin-Transformer's, Mixup 0.8 / CutMix 1.0, AMP,
# follow_drop_path=False; drop-path 0.5 as Swin-B's recipe: how the paper's
# Swin code treats drop-path in a fine-tune is not public).
#
# The official Swin-B (SwinTransformer/storage v1.0.0
# swin_base_patch4_window7_224.pth) in mmpretrain's format is mmpretrain's
# swin-base_3rdparty_in1k:
#   wget -P checkpoints https://download.openmmlab.com/mmclassification/v0/swin-transformer/convert/swin_base_patch4_window7_224-4670dd19.pth
#   SWIN_B_CKPT=checkpoints/swin_base_patch4_window7_224-4670dd19.pth \
#       tools/dist_train.sh <this config> 16
# Its output, work_dirs/swin-base_16xb64-ft40e-tlalign_in1k/epoch_40.pth, is
# the default TL-Align Swin-B of the downstream configs; their CutMix twins
# take the official checkpoint itself (SWIN_B_CKPT).
_base_ = ['./swin-base_16xb64-tlalign_in1k.py']

load_from = '{{$SWIN_B_CKPT:checkpoints/swin_base_patch4_window7_224-4670dd19.pth}}'  # noqa: E501

model = dict(align_cfg=dict(follow_drop_path=False))
optim_wrapper = dict(
    type='AmpOptimWrapper',
    loss_scale='dynamic',
    optimizer=dict(lr=1e-5, weight_decay=1e-8))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=True)]
train_cfg = dict(max_epochs=40)
train_dataloader = dict(drop_last=True)  # Swin's data/build.py:74
randomness = dict(seed=0, diff_rank_seed=True)  # Swin's main.py:319
