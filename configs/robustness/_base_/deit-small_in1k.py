# The DeiT-S ImageNet classifier the robustness test configs of DeiT-S
# evaluate: the model and test-time set-up of configs/tlalign/deit-small_4xb256-cutmix_in1k.py
# (TL-Align's checkpoint and its CutMix twin's load into it alike: the models
# are identical at test time). Each test config adds its dataset base.
_base_ = ['../../tlalign/deit-small_4xb256-cutmix_in1k.py']
custom_imports = dict(
    imports=['tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)
