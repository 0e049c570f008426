# mmpretrain's SwinTransformer (Swin-T; the configs set `arch`) as the
# backbone of an mmseg or mmdet model, loaded strictly from an ImageNet
# classification checkpoint of configs/tlalign/ (a Runner checkpoint or its
# tools/export_backbone.py export).
#
# A template, not a `model`: the detection and segmentation recipes the
# downstream configs inherit define `model` themselves, and mmengine refuses
# a key defined by two bases. A config lists this file in `_base_` beside its
# recipe and takes the template out of `_base_` (so that the resolved config
# holds it once, as model.backbone), then sets the checkpoint and drop-path:
#   model = dict(backbone=dict(**_base_.pop('swin_strict_pretrained'),
#                              drop_path_rate=0.3))
#   model['backbone']['init_cfg']['checkpoint'] = checkpoint_file
#
# The backbone is the pretrained module itself (through the cross-scope
# registry), window 7 as in pretraining, all four stages out. It loads
# strictly (every key, or an error) except the output norms of stages 1-3
# (norm0-2): an ImageNet Swin only has the last one (norm3), so they are new
# by design (allow_missing) and start as identity LayerNorms.
swin_strict_pretrained = dict(
    _delete_=True,  # replaces the recipe's own backbone
    type='mmpretrain.SwinTransformer',
    arch='tiny',
    img_size=224,
    window_size=7,
    out_indices=(0, 1, 2, 3),
    pad_small_map=True,
    # the strict loader of tlalign_mm (not mmengine's Pretrained):
    # strict=True makes a config that loses `_scope_` fail loudly
    init_cfg=dict(
        type='Pretrained',
        _scope_='tlalign_mm',
        checkpoint=None,
        prefix='backbone.',
        strict=True,
        allow_missing=['norm0.*', 'norm1.*', 'norm2.*']))
