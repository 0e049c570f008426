# mmpretrain's VisionTransformer (DeiT-S; the configs set `arch`) for
# fine-tuning, loaded strictly (every key, or an error) from an ImageNet
# classification checkpoint of configs/tlalign/ (a Runner checkpoint or its
# tools/export_backbone.py export).
#
# A template, not a `model`: the configs that use it also inherit a recipe
# that defines `model`, and mmengine refuses a key defined by two bases. A
# config lists this file in `_base_` and takes the template out of `_base_`
# (so that the resolved config holds it once, as model.backbone), adding the
# registry type and what its task needs:
#   model = dict(backbone=dict(type='VisionTransformer',
#                              **_base_.pop('deit_strict_pretrained'),
#                              img_size=224, drop_path_rate=0.0))
#   model['backbone']['init_cfg']['checkpoint'] = checkpoint_file
deit_strict_pretrained = dict(
    arch='deit-small',
    patch_size=16,
    # the strict loader of tlalign_mm (not mmengine's Pretrained):
    # strict=True makes a config that loses `_scope_` fail loudly
    init_cfg=dict(
        type='Pretrained',
        _scope_='tlalign_mm',
        checkpoint=None,
        prefix='backbone.',
        strict=True))
