# Fine-tune an official DeiT-B with TL-Align for 40 epochs: constant lr 1e-5,
# weight decay 1e-8, the rest of DeiT-B's recipe. The checkpoint is given by
# path, an mmpretrain-format DeiT-B (e.g. mmpretrain's
# deit-base_pt-16xb64_in1k_20220216-db63c16c.pth):
#   DEIT_B_CKPT=/path/to/deit-base.pth tools/dist_train.sh <this config> 8
_base_ = ['./deit-base_16xb64_in1k_tlalign.py']

load_from = '{{$DEIT_B_CKPT:checkpoints/deit-base_pt-16xb64_in1k.pth}}'

optim_wrapper = dict(optimizer=dict(lr=1e-5, weight_decay=1e-8))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=True)]
train_cfg = dict(max_epochs=40)
