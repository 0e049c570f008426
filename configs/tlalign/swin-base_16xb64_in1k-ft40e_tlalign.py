# Fine-tune a Swin-B ImageNet checkpoint with TL-Align for 40 epochs: constant
# lr 1e-5, weight decay 1e-8, the rest of Swin-B's recipe. The checkpoint is
# an mmpretrain-format Swin-B given by path:
#   SWIN_B_CKPT=/path/to/swin-base.pth tools/dist_train.sh <this config> 8
_base_ = ['./swin-base_16xb64_in1k_tlalign.py']

load_from = '{{$SWIN_B_CKPT:checkpoints/swin-base_16xb64_in1k.pth}}'

optim_wrapper = dict(optimizer=dict(lr=1e-5, weight_decay=1e-8))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=True)]
train_cfg = dict(max_epochs=40)
