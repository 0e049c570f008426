# Preemption-safe training for the ImageNet recipes: add this file to a
# config's _base_ list (beside any other base: it sets no key other bases
# set, so it composes with configs that have their own custom_hooks).
#
# tools/train.py adds LastCheckpointHook to every training run: the full
# Runner checkpoint goes to work_dir/last.pth (atomically) every 10 minutes
# and when Ctrl-C or SIGTERM stops the run; with this file also every
# `interval` iterations, so a killed job loses at most `interval`
# iterations instead of up to an epoch (1,251 iterations per ImageNet epoch
# at batch 1,024), with the random number generator states; on
#   tools/train.py CONFIG --resume
# the run continues at the batch the checkpoint reached with the same random
# draws, and ends as the uninterrupted run would (bit for bit on one process
# with num_workers=0; tlalign_mm/checkpoint/hooks.py says what is not
# restored). Another launcher: list
#   dict(type='LastCheckpointHook', _scope_='tlalign_mm', interval=500)
# in custom_hooks instead.
#
# 500 iterations is a few minutes of DeiT-S/Swin-T training on 8 GPUs; a
# DeiT-B checkpoint with optimizer state is about 1 GB.
last_checkpoint_hook = dict(interval=500)
