"""TL-Align through timm's VisionTransformer family (via mmpretrain's
``TIMMBackbone``, built by ``PooledTIMMBackbone``) against a dense
reference, against mmpretrain's ViT with the same weights, with timm's
drop-path, and as a plain timm model (eval forward, checkpoint, export).
No weights are downloaded: every model has random, sharpened weights."""
import copy
import threading

import pytest
import timm
import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS

from tlalign_mm import align_labels
from tlalign_mm.models import aligned_forward
from tlalign_mm.models.recorders import TimmViTRecorder, get_recorder

from .dense_reference_timm import (
    dense_readout,
    dense_timm_forward,
    dense_timm_labels,
    initial_labels,
)
from .mixes import in_classes, random_mix


def sharpen(model, factor=4.0, seed=0):
    """Random weights with structure: position embeddings and prefix tokens
    of unit-ish scale, and query/key projections scaled so that attention
    is far from uniform."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in ('pos_embed', 'cls_token', 'dist_token', 'reg_token'):
            p = getattr(model, name, None)
            if p is not None:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
        for block in model.blocks:
            dim = block.attn.attn_dim
            block.attn.qkv.weight[:2 * dim] *= factor
    return model


def build(model_name, fused=True, seed=0, **kwargs):
    """A ``PooledTIMMBackbone`` (a plain mmpretrain ``TIMMBackbone``) in
    eval mode, random sharpened weights."""
    torch.manual_seed(seed)
    backbone = MODELS.build(
        dict(type='PooledTIMMBackbone', model_name=model_name, **kwargs))
    sharpen(backbone.timm_model, seed=seed)
    set_fused(backbone, fused)
    backbone.eval()  # (mmpretrain's BaseBackbone.train returns None)
    return backbone


def set_fused(backbone, fused):
    for block in backbone.timm_model.blocks:
        block.attn.fused_attn = fused


def mixup(B, S, H, W):
    """The same random mix at every pixel."""
    images, _, targets = random_mix(B, S, H, W)
    g = torch.Generator().manual_seed(3)
    lam = torch.rand(B, S, generator=g) + 0.1
    lam = lam / lam.sum(1, keepdim=True)
    return images, lam[:, :, None, None].expand(B, S, H, W), targets


def coarse_mix(B, S, H, W, cell=24):
    """``S`` sources in cells of ``cell`` pixels with random (sharpened)
    shares: the cells cut through 16-pixel patches, and, unlike pixel-level
    noise, they survive the patch mean at 224."""
    images, _, targets = random_mix(B, S, H, W)
    g = torch.Generator().manual_seed(4)
    pw = torch.rand(B, S, -(-H // cell), -(-W // cell), generator=g).pow(4)
    pw = pw.repeat_interleave(cell, 2).repeat_interleave(cell, 3)
    pw = pw[..., :H, :W]
    return images, pw / pw.sum(1, keepdim=True), targets


MIXES = {
    'CutMix': lambda side: random_mix(3, 2, side, side,
                                      box=(30, 150, 45, 190)),
    'MixUp': lambda side: mixup(3, 2, side, side),
    '3 sources': lambda side: coarse_mix(3, 3, side, side),
}
# The three models, full size at 224 (12 blocks).
MODELS_224 = {
    'deit_tiny': dict(model_name='deit_tiny_patch16_224'),
    'vit_small avg': dict(model_name='vit_small_patch16_224',
                          global_pool='avg'),
    'distilled DeiT': dict(model_name='deit_tiny_distilled_patch16_224'),
}
_CACHE = {}


def cached(name):
    if name not in _CACHE:
        _CACHE[name] = build(**MODELS_224[name])
    return _CACHE[name]


def check_against_reference(backbone, images, pw, targets, patch,
                            moved=True):
    model = backbone.timm_model
    area_share = pw.mean((2, 3))
    labels, history = align_labels(backbone, images, pw, targets,
                                   return_token_labels=True)
    with torch.no_grad():
        inputs, _ = dense_timm_forward(model, images)
        Y = initial_labels(model, pw, targets, area_share, patch)
        ref_history = dense_timm_labels(model, inputs, Y)
    ref = dense_readout(model, ref_history[-1])
    assert (labels.double() - ref).abs().max() <= 1e-5
    assert len(history) == len(ref_history) == len(model.blocks) + 1
    for ours, theirs in zip(history, ref_history):
        assert (in_classes(ours, targets) - theirs).abs().max() <= 1e-5
    if moved:  # the alignment moved labels and the readout: it can fail
        assert (ref_history[-1] - ref_history[0]).abs().max() > 1e-2
        start = dense_readout(model, ref_history[0])
        assert (ref - start).abs().max() > 1e-4


@pytest.mark.parametrize('fused', [True, False], ids=['fused', 'explicit'])
@pytest.mark.parametrize('mix', list(MIXES))
@pytest.mark.parametrize('name', list(MODELS_224))
def test_matches_dense_reference(name, mix, fused):
    backbone = cached(name)
    set_fused(backbone, fused)
    images, pw, targets = MIXES[mix](224)
    check_against_reference(backbone, images, pw, targets, 16,
                            moved=mix != 'MixUp')


# Other members of the family, small (3 blocks) and at other sizes.
FAMILY = {
    # After 12 blocks the class and distillation tokens' labels agree to
    # 1e-5; after 3 they do not, so this case tells the readouts apart.
    'distilled DeiT, 3 blocks': (dict(
        model_name='deit_tiny_distilled_patch16_224', depth=3,
        img_size=64), 64),
    'DeiT3 (layer scale, no_embed_class)': (dict(
        model_name='deit3_small_patch16_224', depth=3, img_size=64), 64),
    'registers, qk-norm, avg': (dict(
        model_name='vit_small_patch16_224', depth=3, img_size=64,
        reg_tokens=4, qk_norm=True, global_pool='avg'), 64),
    'no class token, registers': (dict(
        model_name='vit_small_patch16_224', depth=3, img_size=64,
        class_token=False, reg_tokens=2, global_pool='avg'), 64),
    'avg over prefix too': (dict(
        model_name='vit_small_patch16_224', depth=3, img_size=64,
        global_pool='avg', pool_include_prefix=True), 64),
    'dynamic size, padded': (dict(
        model_name='deit_tiny_patch16_224', depth=3, dynamic_img_size=True,
        dynamic_img_pad=True), 70),
    'ResPostBlock': (dict(
        model_name='deit_tiny_patch16_224', depth=3, img_size=64,
        block_fn=timm.models.vision_transformer.ResPostBlock), 64),
}


@pytest.mark.parametrize('fused', [True, False], ids=['fused', 'explicit'])
@pytest.mark.parametrize('name', list(FAMILY))
def test_family_matches_dense_reference(name, fused):
    kwargs, side = FAMILY[name]
    backbone = build(fused=fused, **kwargs)
    images, pw, targets = random_mix(2, 3, side, side)
    check_against_reference(backbone, images, pw, targets, 16)


def test_reference_forward_is_timms():
    """The reference's hand-written attention is the model's: its tokens
    are timm's ``forward_features``."""
    for name in MODELS_224:
        model = cached(name).timm_model
        images = random_mix(2, 2, 224, 224)[0]
        with torch.no_grad():
            _, tokens = dense_timm_forward(model, images)
            torch.testing.assert_close(tokens, model.forward_features(images),
                                       atol=1e-5, rtol=1e-5)


def timm_to_mmpretrain(state_dict):
    """timm DeiT keys -> mmpretrain ``VisionTransformer`` keys, after
    mmpretrain's converter (``tools/model_converters/
    deit3_to_mmpretrain.py``, mmpretrain 1.2.0), for DeiT (no layer
    scale)."""
    out = {}
    for k, v in state_dict.items():
        k = k.replace('patch_embed.proj.', 'patch_embed.projection.')
        if k.startswith('blocks.'):
            k = k.replace('blocks.', 'layers.').replace('norm1', 'ln1')
            k = k.replace('norm2', 'ln2')
            k = k.replace('mlp.fc1', 'ffn.layers.0.0')
            k = k.replace('mlp.fc2', 'ffn.layers.1')
        elif k.startswith('norm.'):
            k = k.replace('norm.', 'ln1.')
        out[k] = v
    return out


@pytest.mark.parametrize('fused', [True, False], ids=['fused', 'explicit'])
def test_same_labels_as_mmpretrain_vit_with_the_same_weights(fused):
    timm_backbone = cached('deit_tiny')
    set_fused(timm_backbone, fused)
    vit = MODELS.build(dict(type='VisionTransformer', arch='deit-tiny',
                            img_size=224, patch_size=16))
    vit.load_state_dict(
        timm_to_mmpretrain(timm_backbone.timm_model.state_dict()),
        strict=True)
    vit.eval()
    images, pw, targets = MIXES['CutMix'](224)
    with torch.no_grad():  # the conversion is right: same features
        torch.testing.assert_close(vit(images)[0], timm_backbone(images)[0],
                                   atol=1e-5, rtol=1e-5)
    ours, history = align_labels(timm_backbone, images, pw, targets,
                                 return_token_labels=True)
    theirs, vit_history = align_labels(vit, images, pw, targets,
                                       return_token_labels=True)
    assert (ours - theirs).abs().max() <= 1e-5
    for a, b in zip(history, vit_history):
        assert (a - b).abs().max() <= 1e-5
    assert (history[-1] - history[0]).abs().max() > 1e-2


@pytest.mark.parametrize('fused', [True, False], ids=['fused', 'explicit'])
def test_drop_path_follows_timms_own_draw(fused):
    backbone = build('deit_tiny_patch16_224', fused=fused, depth=4,
                     img_size=64, drop_path_rate=0.1)
    for block in backbone.timm_model.blocks:
        block.drop_path1.drop_prob = block.drop_path2.drop_prob = 0.5
    plain = copy.deepcopy(backbone)  # never traced
    model = backbone.timm_model
    backbone.train()
    plain.train()
    images, pw, targets = random_mix(8, 2, 64, 64)
    keeps, inputs = [], []
    handles = []
    for block in model.blocks:
        handles.append(block.register_forward_pre_hook(
            lambda m, args: inputs.append(args[0].detach())))
        handles.append(block.drop_path1.register_forward_hook(
            lambda m, args, out: keeps.append(out.flatten(1).any(1))))
    torch.manual_seed(5)
    traced = aligned_forward(backbone, images, pw, keep_history=True)
    for handle in handles:
        handle.remove()
    torch.manual_seed(5)
    tokens = plain(images)[0]
    # The traced forward drew timm's own masks: its tokens are the plain
    # forward's (the fused path feeds wider heads: equal to rounding).
    torch.testing.assert_close(traced.feats[0], tokens, atol=1e-5, rtol=1e-5)
    keeps = torch.stack(keeps)
    assert not keeps.all() and keeps.any()  # both cases occur
    with torch.no_grad():
        Y = initial_labels(model, pw, targets, pw.mean((2, 3)), 16)
        ref = dense_timm_labels(model, inputs, Y, keeps)
    for i, (ours, theirs) in enumerate(zip(traced.history, ref)):
        assert (in_classes(ours, targets) - theirs).abs().max() <= 1e-5
        if i:  # dropped samples keep their labels in that block
            dropped = ~keeps[i - 1]
            assert torch.equal(ours[dropped], traced.history[i - 1][dropped])


def test_eval_forward_is_the_plain_timm_model_bit_for_bit():
    kwargs = dict(model_name='deit_tiny_patch16_224', depth=3, img_size=64)
    for pool in ('token', 'avg'):
        torch.manual_seed(0)
        built = MODELS.build(dict(type='TLAlignBackbone', backbone=dict(
            type='PooledTIMMBackbone', global_pool=pool, **kwargs)))
        built.eval()
        assert type(built).__name__ == 'TIMMBackbone'
        timm_kwargs = dict(kwargs)
        name = timm_kwargs.pop('model_name')
        model = timm.create_model(name, pretrained=False, num_classes=0,
                                  global_pool=pool, **timm_kwargs).eval()
        state = {k[len('timm_model.'):]: v
                 for k, v in built.state_dict().items()}
        model.load_state_dict(state, strict=True)
        images, pw, targets = random_mix(2, 2, 64, 64)
        with torch.no_grad():
            expected = model.forward_head(model.forward_features(images),
                                          pre_logits=True)
            assert torch.equal(built(images)[0], expected)
            align_labels(built, images, pw, targets)  # taps used once
            assert torch.equal(built(images)[0], expected)


def test_export_loads_strictly_into_timm_create_model(tmp_path):
    """A TL-Align classifier checkpoint -> plain timm state dict whose
    logits are the classifier's."""
    from mmengine.config import Config
    from mmengine.runner.checkpoint import save_checkpoint

    from tlalign_mm.downstream.export import export_timm
    for name in ('deit_tiny_patch16_224', 'deit_tiny_distilled_patch16_224'):
        cfg = Config.fromfile(
            'configs/tlalign/deit-small-timm_4xb256-tlalign_in1k.py')
        cfg.model.backbone.update(model_name=name, depth=2, img_size=32,
                                  patch_size=8)
        cfg.model.head.in_channels = 192
        torch.manual_seed(0)
        classifier = MODELS.build(cfg.model).eval()
        with torch.no_grad():
            for p in classifier.parameters():
                p.add_(0.1 * torch.randn_like(p))
        ckpt = str(tmp_path / f'{name}.pth')
        save_checkpoint(dict(meta=dict(cfg=cfg.pretty_text),
                             state_dict=classifier.state_dict()), ckpt)
        out = str(tmp_path / f'{name}_timm.pth')
        info = export_timm(ckpt, out)
        assert info['kwargs']['num_classes'] == 1000
        state = torch.load(out, weights_only=True)
        model = timm.create_model(name, pretrained=False, **info['kwargs'])
        model.load_state_dict(state, strict=True)
        model.eval()
        images = torch.randn(2, 3, 32, 32)
        with torch.no_grad():
            ours = classifier(images, mode='tensor')
            torch.testing.assert_close(model(images), ours, atol=1e-5,
                                       rtol=1e-5)


def test_recording_intercepts_no_function_and_survives_a_raise():
    """Recording puts no torch function mode anywhere: an SDPA call from
    another thread while the attention runs, or from the MLP, is the plain
    function, and a forward that raises leaves nothing behind (the next
    recorded forward gives the same labels)."""
    backbone = build('deit_tiny_patch16_224', depth=2, img_size=32,
                     patch_size=8, embed_dim=32, num_heads=2)
    images, pw, targets = random_mix(2, 2, 32, 32)
    q = torch.randn(1, 1, 3, 4)
    plain_out = F.scaled_dot_product_attention(q, q, q)
    seen = []

    def other_thread():
        seen.append(F.scaled_dot_product_attention(q, q, q))

    def inside_attention(module, args, output):
        seen.append(torch.overrides._get_current_function_mode())
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()

    def in_mlp(module, args, output):
        seen.append(torch.overrides._get_current_function_mode())
        seen.append(F.scaled_dot_product_attention(q, q, q))

    block = backbone.timm_model.blocks[0]
    handles = [block.attn.qkv.register_forward_hook(inside_attention),
               block.mlp.register_forward_hook(in_mlp)]
    reference = align_labels(backbone, images, pw, targets)
    mode_inside, from_thread, mode_in_mlp, from_mlp = seen
    assert mode_inside is None and mode_in_mlp is None
    assert torch.equal(from_thread, plain_out)
    assert torch.equal(from_mlp, plain_out)
    assert torch.overrides._get_current_function_mode() is None
    for handle in handles:
        handle.remove()

    def fail(module, args, output):
        raise KeyError('boom')

    handle = block.attn.qkv.register_forward_hook(fail)
    with pytest.raises(KeyError, match='boom'):
        align_labels(backbone, images, pw, targets)
    handle.remove()
    assert torch.overrides._get_current_function_mode() is None
    torch.testing.assert_close(align_labels(backbone, images, pw, targets),
                               reference, atol=0, rtol=0)


def test_every_other_timm_model_gets_a_clear_error():
    images, pw, targets = random_mix(1, 2, 32, 32)
    tiny = dict(img_size=32, patch_size=8, embed_dim=32, depth=1,
                num_heads=2)

    def tlalign(**backbone):
        return MODELS.build(dict(type='TLAlignBackbone', backbone=backbone))

    with pytest.raises(ValueError, match="type='PooledTIMMBackbone'"):
        tlalign(type='TIMMBackbone', model_name='deit_tiny_patch16_224',
                **tiny)
    for name, kwargs in [
        ('swin_tiny_patch4_window7_224',
         dict(img_size=32, embed_dim=16, depths=(1, 1), num_heads=(1, 2))),
        ('resnet18', {}),
    ]:
        with pytest.raises(NotImplementedError,
                           match="VisionTransformer family.*SwinTransformer"):
            tlalign(type='TIMMBackbone', model_name=name, **kwargs)
        bare = timm.create_model(name, pretrained=False, **kwargs)
        assert isinstance(get_recorder(bare), TimmViTRecorder)
        with pytest.raises(NotImplementedError, match='does not record timm'):
            align_labels(bare, images, pw, targets)
    for kwargs, match in [
        (dict(patch_drop_rate=0.5), 'PatchDropout'),
        (dict(attn_layer='diff'), 'block 0 is a Block with DiffAttention'),
        (dict(block_fn=timm.models.vision_transformer.ParallelScalingBlock),
         'block 0 is a ParallelScalingBlock'),
        (dict(global_pool='map'), "global_pool='map'"),
    ]:
        model = timm.create_model('deit_tiny_patch16_224', pretrained=False,
                                  **dict(tiny, **kwargs))
        with pytest.raises(NotImplementedError, match=match):
            align_labels(model, images, pw, targets)
    with pytest.raises(ValueError, match='global_pool must be one of'):
        MODELS.build(dict(type='PooledTIMMBackbone',
                          model_name='deit_tiny_patch16_224',
                          global_pool='max'))
    with pytest.raises(ValueError, match='timm refused'):
        MODELS.build(dict(type='PooledTIMMBackbone',
                          model_name='deit_tiny_distilled_patch16_224',
                          global_pool='avg', **tiny))
    distilled = build('deit_tiny_distilled_patch16_224', **tiny)
    distilled.timm_model.set_distilled_training(True)
    with pytest.raises(NotImplementedError, match='distilled_training'):
        align_labels(distilled, images, pw, targets)

