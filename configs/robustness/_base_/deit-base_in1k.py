# The DeiT-B ImageNet classifier the robustness test configs of DeiT-B
# evaluate: the model and test-time set-up of configs/tlalign/deit-base_16xb64-cutmix_in1k.py
# (TL-Align's checkpoint and its CutMix twin's load into it alike: the models
# are identical at test time). Each test config adds its dataset base.
# The paper's B-size pair: work_dirs/deit-base_16xb64-ft40e-tlalign_in1k/
# epoch_40.pth (TL-Align) and the official checkpoint (DEIT_B_CKPT, see
# configs/tlalign/deit-base_16xb64-ft40e-tlalign_in1k.py).
_base_ = ['../../tlalign/deit-base_16xb64-cutmix_in1k.py']
custom_imports = dict(
    imports=['tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)
