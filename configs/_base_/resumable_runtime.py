# Preemption-safe training for the ImageNet recipes: add this file to a
# config's _base_ list.
#
# LastCheckpointHook saves the full Runner checkpoint to work_dir/last.pth
# every `interval` iterations (atomically: temporary file, then rename), so
# a killed job loses at most `interval` iterations instead of up to an epoch
# (1,251 iterations per ImageNet epoch at batch 1,024). Every checkpoint also
# records the random number generator states; on
#   tools/train.py CONFIG --resume
# the run continues at the batch the checkpoint reached (the sampler skips
# the trained batches without loading them) with the same random draws, so
# it ends as the uninterrupted run would (bit for bit on one process with
# num_workers=0; tlalign_mm/engine/last_checkpoint_hook.py says what is not
# restored).
#
# 500 iterations is a few minutes of DeiT-S/Swin-T training on 8 GPUs; a
# DeiT-B checkpoint with optimizer state is about 1 GB.
custom_hooks = [
    dict(type='LastCheckpointHook', _scope_='tlalign_mm.engine',
         interval=500),
]
