# The Swin-S ImageNet classifier the robustness test configs of Swin-S
# evaluate: the model and test-time set-up of configs/tlalign/swin-small_16xb64-cutmix_in1k.py
# (TL-Align's checkpoint and its CutMix twin's load into it alike: the models
# are identical at test time). Each test config adds its dataset base.
_base_ = ['../../tlalign/swin-small_16xb64-cutmix_in1k.py']
custom_imports = dict(
    imports=['tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)
