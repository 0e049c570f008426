"""The strict ``Pretrained`` of ``tlalign_mm.downstream``: a backbone loads
every tensor of the checkpoint, or building the run fails naming what does
not fit, from any of the mmpretrain, mmseg and mmdet scopes."""
import pytest
import torch
from mmengine.logging import MMLogger
from mmengine.registry import MODELS, init_default_scope
from mmpretrain.models.utils import resize_pos_embed

from tlalign_mm.checkpoint import CheckpointMismatchError
from tlalign_mm.downstream import StrictPretrainedInit
from tlalign_mm.registry import SCOPE

VIT = dict(type='mmpretrain.VisionTransformer', img_size=32, patch_size=16,
           arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                     feedforward_channels=64))


def strict(checkpoint, prefix='backbone.', **allowed):
    """The init_cfg the downstream configs write."""
    return dict(type='Pretrained', _scope_=SCOPE, checkpoint=checkpoint,
                prefix=prefix, strict=True, **allowed)


def build(cfg, scope='mmpretrain'):
    init_default_scope(scope)
    return MODELS.build(cfg)


def save(path, module, extra=None, drop=()):
    """A classifier checkpoint of ``module``'s perturbed tensors (equal to
    no initialisation by chance) under ``backbone.``."""
    gen = torch.Generator().manual_seed(0)
    sd = {k: v + torch.randn(v.shape, generator=gen) if
          v.is_floating_point() else v for k, v in
          module.state_dict().items() if k not in drop}
    torch.save({'meta': {'epoch': 1}, 'state_dict': dict(
        {'backbone.' + k: v for k, v in sd.items()},
        **{'head.fc.weight': torch.zeros(3, 4)}, **(extra or {}))}, path)
    return str(path), sd


@pytest.mark.parametrize('scope', ['mmpretrain', 'mmseg', 'mmdet'])
def test_vit_ends_init_weights_with_every_tensor(tmp_path, monkeypatch,
                                                 caplog, scope):
    """The children's own init (FFN xavier) and ViT's pos_embed re-init do
    not run after the load; pos_embed is resized by the backbone's load
    hook (the same function on the same input: exact). mmengine imports
    ``<scope>.registry`` when it switches scope: no 'Failed to import'
    is logged, and the load is named."""
    path, sd = save(tmp_path / 'vit.pth', build(VIT))
    target = build(dict(VIT, img_size=64, out_type='featmap',
                        out_indices=(0, 1), init_cfg=strict(path)), scope)
    logger = MMLogger.get_current_instance()  # its own handlers only
    monkeypatch.setattr(logger, 'handlers', [*logger.handlers, caplog.handler])
    target.init_weights()
    assert not [m for m in caplog.messages if 'Failed to' in m], caplog.text
    assert [m for m in caplog.messages if 'strictly' in m]
    got = target.state_dict()
    assert set(got) == set(sd)
    sd['pos_embed'] = resize_pos_embed(sd['pos_embed'], (2, 2), (4, 4),
                                       'bicubic', 1)
    for key, value in sd.items():
        assert torch.equal(got[key], value), key


@pytest.mark.parametrize('case, message', [
    ('missing', 'missing in the checkpoint \\(1\\): layers.1.attn.qkv.weight'),
    ('unexpected', 'unexpected in the checkpoint \\(1\\): ln9\\.weight'),
    ('layout', r'unexpected.*ln1\.bias'),  # mmseg's ViT: no final norm
    # with a size mismatch too, the other keys are still named
    ('shape', r'(?s)unexpected in the checkpoint \(1\): ln9\.weight.*shape '
     r'differs.*\(32,\) in the checkpoint, \(48,\) in the model'),
    ('prefix', r"starts with prefix 'model\.'.*backbone\."),
    ('no prefix', r'(?s)missing.*unexpected.*backbone\.cls_token'),
])
def test_what_does_not_fit_fails_naming_it(tmp_path, case, message):
    path, _ = save(tmp_path / 'vit.pth', build(VIT), extra={
        'backbone.ln9.weight': torch.ones(32)} if case in ('unexpected',
                                                          'shape') else
        None, drop=['layers.1.attn.qkv.weight'] if case == 'missing' else ())
    prefix = {'prefix': 'model.', 'no prefix': ''}.get(case, 'backbone.')
    cfg = dict(VIT, init_cfg=strict(path, prefix))
    if case == 'layout':
        cfg['final_norm'] = False
    if case == 'shape':
        cfg['arch'] = dict(VIT['arch'], embed_dims=48)
    with pytest.raises(CheckpointMismatchError, match=message):
        build(cfg).init_weights()
    if case == 'unexpected':  # a documented exception is accepted
        build(dict(VIT, init_cfg=strict(path, allow_unexpected=['ln9.*']))
              ).init_weights()


def test_options_and_scope_fail_loudly_never_load_silently(tmp_path,
                                                          monkeypatch):
    """``strict=False`` and a string where patterns go are refused; a
    config that loses ``_scope_`` gets mmengine's Pretrained, which does
    not take ``strict`` (a TypeError, not a silent load)."""
    path, sd = save(tmp_path / 'vit.pth', build(VIT))
    with pytest.raises(ValueError, match='strict'):
        StrictPretrainedInit(path, strict=False)
    with pytest.raises(TypeError, match='list of patterns'):
        StrictPretrainedInit(path, allow_missing='norm0.*')
    cfg = strict(path)
    del cfg['_scope_']
    with pytest.raises(TypeError, match='strict'):
        build(dict(VIT, init_cfg=cfg)).init_weights()
    # a ``hint`` only adds to the missing-file error: it says how to make
    # the file, and a ``~`` path that exists still loads (expanded)
    monkeypatch.setenv('HOME', str(tmp_path))
    target = build(VIT)
    StrictPretrainedInit(checkpoint='~/vit.pth', hint='run X first')(target)
    assert torch.equal(target.state_dict()['cls_token'], sd['cls_token'])
    with pytest.raises(CheckpointMismatchError, match='does not exist. run X'):
        StrictPretrainedInit(checkpoint='~/absent.pth',
                             hint='run X first')(target)
