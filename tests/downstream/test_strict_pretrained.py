"""The strict ``Pretrained`` of ``tlalign_mm.downstream``: a backbone loads
every tensor of the checkpoint, or building the run fails, from any of the
mmpretrain, mmseg and mmdet scopes."""
import logging

import pytest
import torch
from mmengine.logging import MMLogger
from mmengine.registry import MODELS, init_default_scope
from mmpretrain.models.utils import resize_pos_embed

from tlalign_mm.checkpoint import CheckpointMismatchError
from tlalign_mm.downstream import StrictPretrainedInit
from tlalign_mm.registry import SCOPE, WEIGHT_INITIALIZERS

VIT = dict(
    type='mmpretrain.VisionTransformer',
    arch=dict(embed_dims=32, num_layers=2, num_heads=2,
              feedforward_channels=64),
    img_size=32,
    patch_size=16)
SWIN = dict(
    type='mmpretrain.SwinTransformer',
    arch=dict(embed_dims=16, depths=[1, 2], num_heads=[1, 2]),
    img_size=32,
    window_size=4)
SWIN_NORMS = ['norm0.*']


def strict_pretrained_cfg(checkpoint, prefix='backbone.', **allowed):
    """The init_cfg the downstream configs write."""
    return dict(type='Pretrained', _scope_=SCOPE, checkpoint=checkpoint,
                prefix=prefix, strict=True, **allowed)


def build(cfg, scope='mmpretrain'):
    init_default_scope(scope)
    return MODELS.build(cfg)


def perturbed(module, seed=0):
    """A state dict that equals no initialisation by chance."""
    gen = torch.Generator().manual_seed(seed)
    sd = {k: v.clone() for k, v in module.state_dict().items()}
    for v in sd.values():
        if v.is_floating_point():
            v.add_(torch.randn(v.shape, generator=gen))
    return sd


def save_classifier(path, backbone_sd, extra=None):
    """A classifier checkpoint: the backbone under ``backbone.``."""
    sd = {'backbone.' + k: v for k, v in backbone_sd.items()}
    sd['head.fc.weight'] = torch.zeros(3, 4)
    sd.update(extra or {})
    torch.save({'meta': {'epoch': 1}, 'state_dict': sd}, path)
    return str(path)


@pytest.fixture
def vit_ckpt(tmp_path):
    sd = perturbed(build(VIT))
    return save_classifier(tmp_path / 'vit.pth', sd), sd


@pytest.mark.parametrize('scope', ['mmpretrain', 'mmseg', 'mmdet'])
def test_vit_loads_every_tensor_after_full_init(vit_ckpt, scope):
    """init_weights on the downstream backbone ends with the checkpoint's
    tensors: the children's own init (FFN xavier) and ViT's pos_embed
    re-init must not run after the load; pos_embed is resized by the
    backbone's load hook."""
    path, sd = vit_ckpt
    target = build(
        dict(VIT, img_size=64, out_type='featmap', out_indices=(0, 1),
             init_cfg=strict_pretrained_cfg(path)), scope)
    target.init_weights()
    got = target.state_dict()
    assert set(got) == set(sd)
    for key, value in sd.items():
        if key == 'pos_embed':
            value = resize_pos_embed(value, (2, 2), (4, 4), 'bicubic', 1)
        # exact: the loaded tensor is the saved one (pos_embed resized by the
        # same function, on the same input)
        torch.testing.assert_close(got[key], value, rtol=0, atol=0,
                                   msg=key)


def test_swin_all_stages_only_new_output_norms_allowed(tmp_path):
    src = build(dict(SWIN, out_indices=(1, )))  # last stage, as ImageNet
    sd = perturbed(src)
    path = save_classifier(tmp_path / 'swin.pth', sd)
    down = dict(SWIN, out_indices=(0, 1), pad_small_map=True)
    target = build(
        dict(down, init_cfg=strict_pretrained_cfg(path, allow_missing=(
            'norm0.*', ))), 'mmdet')
    target.init_weights()
    got = target.state_dict()
    for key, value in sd.items():
        assert torch.equal(got[key], value), key
    assert torch.equal(got['norm0.weight'], torch.ones(16))
    assert torch.equal(got['norm0.bias'], torch.zeros(16))
    # relative_position_index is a persistent buffer: it is in the
    # checkpoint and loads like everything else
    assert any('relative_position_index' in k for k in sd)

    target = build(dict(down, init_cfg=strict_pretrained_cfg(path)),
                   'mmdet')
    with pytest.raises(CheckpointMismatchError, match=r'missing.*norm0\.bias'):
        target.init_weights()


def test_missing_key_fails(tmp_path, vit_ckpt):
    _, sd = vit_ckpt
    sd = dict(sd)
    del sd['layers.1.attn.qkv.weight']
    path = save_classifier(tmp_path / 'missing.pth', sd)
    target = build(dict(VIT, init_cfg=strict_pretrained_cfg(path)))
    with pytest.raises(CheckpointMismatchError) as error:
        target.init_weights()
    assert 'missing in the checkpoint (1): layers.1.attn.qkv.weight' in \
        str(error.value)


def test_unexpected_key_fails(tmp_path, vit_ckpt):
    _, sd = vit_ckpt
    path = save_classifier(tmp_path / 'extra.pth', sd,
                           {'backbone.ln9.weight': torch.ones(32)})
    target = build(dict(VIT, init_cfg=strict_pretrained_cfg(path)))
    with pytest.raises(CheckpointMismatchError,
                       match=r'unexpected in the checkpoint \(1\): '
                       r'ln9\.weight'):
        target.init_weights()
    # a documented exception is accepted, and named in the log
    target = build(dict(VIT, init_cfg=strict_pretrained_cfg(
        path, allow_unexpected=['ln9.*'])))
    target.init_weights()


def test_layout_mismatch_fails(tmp_path, vit_ckpt):
    """The classic silent failure: a checkpoint of another layout (here an
    mmseg-style ViT without a final norm) loads nothing useful."""
    path, _ = vit_ckpt
    target = build(dict(VIT, final_norm=False,
                        init_cfg=strict_pretrained_cfg(path)))
    with pytest.raises(CheckpointMismatchError,
                       match=r'unexpected.*ln1\.bias'):
        target.init_weights()


def test_shape_mismatch_fails(vit_ckpt):
    path, _ = vit_ckpt
    wide = dict(VIT, arch=dict(embed_dims=48, num_layers=2, num_heads=2,
                               feedforward_channels=64))
    target = build(dict(wide, init_cfg=strict_pretrained_cfg(path)))
    with pytest.raises(CheckpointMismatchError,
                       match=r'shape differs.*\(32,\) in the checkpoint, '
                       r'\(48,\) in the model'):
        target.init_weights()


@pytest.mark.parametrize('prefix', ['model.', ''])
def test_wrong_prefix_fails(vit_ckpt, prefix):
    path, _ = vit_ckpt
    target = build(dict(VIT, init_cfg=strict_pretrained_cfg(path, prefix)))
    with pytest.raises(CheckpointMismatchError):
        target.init_weights()


def test_prefix_not_found_names_the_prefixes(vit_ckpt):
    path, _ = vit_ckpt
    target = build(dict(VIT, init_cfg=strict_pretrained_cfg(path, 'model.')))
    with pytest.raises(CheckpointMismatchError,
                       match=r"starts with prefix 'model\.'.*backbone\."):
        target.init_weights()


def test_without_scope_the_config_fails_loudly(vit_ckpt):
    """A config that loses `_scope_` gets mmengine's non-strict Pretrained,
    which does not take `strict`: a TypeError, not a silent load."""
    path, _ = vit_ckpt
    cfg = strict_pretrained_cfg(path)
    del cfg['_scope_']
    target = build(dict(VIT, init_cfg=cfg))
    with pytest.raises(TypeError, match='strict'):
        target.init_weights()


def test_strict_must_stay_true(vit_ckpt):
    path, _ = vit_ckpt
    with pytest.raises(ValueError, match='strict'):
        StrictPretrainedInit(path, strict=False)
    with pytest.raises(TypeError, match='list of patterns'):
        StrictPretrainedInit(path, allow_missing='norm0.*')


def test_scope_registry_imports_without_warnings(vit_ckpt):
    """mmengine imports `<scope>.registry` when it switches scope; it must
    exist so that no 'Failed to import' warning is logged."""
    import importlib
    registry = importlib.import_module(SCOPE + '.registry')
    assert registry.WEIGHT_INITIALIZERS.get('Pretrained') is \
        StrictPretrainedInit
    path, _ = vit_ckpt
    logger = MMLogger.get_current_instance()
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger.addHandler(handler)
    try:
        build(dict(VIT, init_cfg=strict_pretrained_cfg(path)),
              'mmseg').init_weights()
    finally:
        logger.removeHandler(handler)
    assert not [m for m in messages if 'Failed to' in m], messages
    assert [m for m in messages if 'strictly' in m]


def test_a_differently_named_loader_would_be_undone(vit_ckpt):
    """Why the strict loader keeps the name 'Pretrained': mmengine runs any
    other init_cfg type *before* the children's init_weights (and ViT
    re-initialises pos_embed unless the type is 'Pretrained'), so the
    same loading under another name is silently overwritten."""
    path, sd = vit_ckpt

    class EarlyLoad(StrictPretrainedInit):
        pass

    WEIGHT_INITIALIZERS.register_module(
        name='_EarlyLoadProbe', module=EarlyLoad, force=True)
    try:
        cfg = dict(strict_pretrained_cfg(path), type='_EarlyLoadProbe')
        target = build(dict(VIT, init_cfg=cfg))
        target.init_weights()
    finally:
        WEIGHT_INITIALIZERS._module_dict.pop('_EarlyLoadProbe')
    got = target.state_dict()
    undone = sorted(k for k in sd if not torch.equal(got[k], sd[k]))
    assert 'pos_embed' in undone and 'layers.0.ffn.layers.0.0.weight' in \
        undone


def test_a_hint_only_adds_to_the_missing_file_error(tmp_path, monkeypatch,
                                                     vit_ckpt):
    """With a ``hint``, a missing checkpoint says how to make it, and a
    ``~`` path that exists still loads (the loader expands it)."""
    path, sd = vit_ckpt
    monkeypatch.setenv('HOME', str(tmp_path))
    home_path = '~/' + path[len(str(tmp_path)) + 1:]
    target = build(VIT)
    StrictPretrainedInit(checkpoint=home_path, hint='run X first')(target)
    # exact: a copy of the saved tensor
    torch.testing.assert_close(target.state_dict()['cls_token'],
                               sd['cls_token'], rtol=0, atol=0)
    with pytest.raises(CheckpointMismatchError, match='does not exist. run X'):
        StrictPretrainedInit(checkpoint='~/absent.pth',
                             hint='run X first')(target)
