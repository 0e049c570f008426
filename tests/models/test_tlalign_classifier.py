"""TLAlignClassifier: the aligned target in training, ImageClassifier
everywhere else; its target switch ('cutmix', 'transmix', 'tlalign') on
the same model and batch, and TransMix against its official definition."""
import math

import numpy as np
import pytest
import torch
from mmengine.optim import OptimWrapper
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from tlalign_mm import align_labels
from tlalign_mm.core.transmix import transmix_lambda

from . import zoo
from .dense import attention_calls, token_attention
from .zoo import head_samples

ARCH = dict(embed_dims=48, num_layers=2, num_heads=3, feedforward_channels=96)
PATCH = 8


def model_cfg(type='TLAlignClassifier', num_classes=5, aug='TLCutMix',
              backbone=None, head='VisionTransformerClsHead', **kwargs):
    """``head``: a type (of width 48) or a config; ``kwargs`` replace the
    other keys."""
    head = head if isinstance(head, dict) else dict(type=head,
                                                     in_channels=48)
    return dict(dict(
        type=type,
        backbone=backbone or dict(type='VisionTransformer', arch=ARCH,
                                  img_size=32, patch_size=PATCH),
        head=dict(dict(num_classes=num_classes), **head),
        data_preprocessor=dict(num_classes=num_classes, mean=[127.5] * 3,
                               std=[127.5] * 3),
        train_cfg=dict(augments=[dict(type=aug, alpha=1.0)])), **kwargs)


def fake_batch(batch_size, num_classes=5, seed=0, side=32):
    g = torch.Generator().manual_seed(seed)
    return dict(
        inputs=[torch.randint(0, 256, (3, side, side), dtype=torch.uint8,
                              generator=g) for _ in range(batch_size)],
        data_samples=[DataSample().set_gt_label(i % num_classes)
                      for i in range(batch_size)])


def build(target='tlalign', **kwargs):
    torch.manual_seed(0)
    model = MODELS.build(model_cfg(target=target, **kwargs))
    model.init_weights()
    model.train()
    model.backbone.eval()  # no drop-path: deterministic references
    return model


def mixed_batch(model, batch_size=4, seed=1, side=32):
    np.random.seed(seed)
    torch.manual_seed(seed)
    return model.data_preprocessor(fake_batch(batch_size, seed=seed,
                                              side=side), training=True)


def trained_target(model, batch):
    """The loss's target: the gt_score of the samples its head is given."""
    given = head_samples(model)
    losses = model(**batch, mode='loss')
    del model.head.loss
    assert torch.isfinite(losses['loss']) and losses['loss'].requires_grad
    return torch.stack([s.gt_score for s in given])


@pytest.mark.parametrize('batch_size', [1, 4])
@pytest.mark.parametrize('align_cfg', [{}, dict(align_layers='last',
                                               residual_norm=False)])
def test_loss_uses_the_aligned_label(batch_size, align_cfg):
    model = build(align_cfg=align_cfg)
    assert type(model.backbone).__name__ == 'VisionTransformer'
    batch = mixed_batch(model, batch_size)
    samples = batch['data_samples']
    mixed = torch.stack([s.gt_score for s in samples]).clone()
    if batch_size == 1:  # a soft-label sample: a gt_score, no gt_label
        del samples[0].gt_label
    mix = batch['mix']
    expected = align_labels(model.backbone, batch['inputs'],
                            mix.pixel_weights, mix.targets, mix.area_share,
                            **align_cfg)
    aligned = trained_target(model, batch)
    torch.testing.assert_close(aligned, expected)
    if batch_size > 1:  # with a partner image, alignment moves the label
        assert (aligned - mixed).abs().max() > 1e-4
    # ... on fresh samples: the caller's keep the mixed target.
    assert torch.equal(torch.stack([s.gt_score for s in samples]), mixed)


@pytest.mark.parametrize('impl', ['sdpa', 'explicit'])
def test_the_options_reach_every_block_as_one_object(impl, monkeypatch):
    """``align_cfg`` is checked once into an ``AlignOptions`` that reaches
    ``Ā Y`` of every block: its ``impl`` chooses the path (no tool needs to
    rebind a package function), and the labels are the same."""
    import tlalign_mm.core.records as records
    model = build(align_cfg=dict(impl=impl))
    assert model.align_cfg.impl == impl
    batch = mixed_batch(model)
    paths, attend = [], records.head_mean_attention

    def spy(*args, **kwargs):
        paths.append(args[5])  # (q, k, labels, bias, scale, impl, ...)
        return attend(*args, **kwargs)

    monkeypatch.setattr(records, 'head_mean_attention', spy)
    aligned = trained_target(model, batch)
    assert paths == [impl] * ARCH['num_layers']
    monkeypatch.undo()
    torch.testing.assert_close(aligned, trained_target(build(), batch))


def test_cutmix_training_predict_and_checkpoints_are_image_classifiers():
    """A checkpoint loads strictly into mmpretrain's ImageClassifier, and
    with target='cutmix' (taps on: the recording is there for every
    target) the trained target and the predictions are its own."""
    ours = build('cutmix')
    plain = MODELS.build(model_cfg(type='ImageClassifier', aug='CutMix'))
    plain.load_state_dict(ours.state_dict(), strict=True)
    plain.train()
    plain.backbone.eval()
    # the head's trained target (its zero init makes every loss log 5)
    assert torch.equal(trained_target(ours, mixed_batch(ours)),
                       trained_target(plain, mixed_batch(plain)))
    ours.eval()
    plain.eval()
    for x, y in zip(ours.val_step(fake_batch(3)), plain.val_step(
            fake_batch(3))):
        assert torch.equal(x.pred_score, y.pred_score)


BAD_OPTIONS = {  # name: (model_cfg's arguments, error, match)
    'no mix record': (dict(aug='CutMix', data_preprocessor=dict(
        type='ClsDataPreprocessor', num_classes=5)), ValueError,
        'TLAlignDataPreprocessor'),
    'head of other classes': (dict(head=dict(
        type='VisionTransformerClsHead', in_channels=48, num_classes=7)),
        ValueError, 'num_classes'),
    # --cfg-options model.align_cfg.residual_norm=no gives the string 'no'
    "residual_norm='no'": (dict(align_cfg=dict(residual_norm='no')),
                           TypeError, 'residual_norm must be True or False'),
    'follow_drop_path=1': (dict(align_cfg=dict(follow_drop_path=1)),
                           TypeError,
                           'follow_drop_path must be True or False'),
    'unknown key': (dict(align_cfg=dict(align_layer='last')), ValueError,
                    r"known: \['align_layers'"),
    'align_cfg not a dict': (dict(align_cfg='abc'), TypeError,
                             'align_cfg.* must be a dict'),
    'unknown attention path': (dict(align_cfg=dict(impl='cuda')),
                               ValueError, 'impl must be one of'),
    'layer out of range': (dict(align_cfg=dict(align_layers=[2])),
                           ValueError, 'out of range'),
    # the wrapper spelling, with a typo it used to drop silently
    'TLAlignBackbone with a typo': (dict(backbone=dict(
        type='TLAlignBackbone', align_layer='last',
        backbone=model_cfg()['backbone'])), ValueError,
        r"options \['align_layers'.*\['align_layer'\] are none of them"),
    'bad target': (dict(target='mixup'), ValueError,
                   "'tlalign', 'transmix', 'cutmix'"),
    'transmix mask': (dict(target='transmix',
                           transmix_cfg=dict(mask='area')), ValueError,
                      'mask must be one of'),
    'transmix key': (dict(target='transmix', transmix_cfg=dict(ratio=0.3)),
                     ValueError, 'Unknown transmix_cfg'),
    'transmix on Swin': (dict(target='transmix', backbone=zoo.SWIN),
                         ValueError, 'class token'),
    'transmix on a pooled ViT': (dict(target='transmix', backbone=dict(
        model_cfg()['backbone'], out_type='avg_featmap')), ValueError,
        'class token'),
}


IN_TRAINING = ('head of other classes', )


def test_a_bad_option_is_one_line_in_the_tools(capsys):
    """Issue 39, item 10: what the tools print for ``--cfg-options
    model.align_cfg=abc``."""
    from tlalign_mm.checkpoint import one_line_errors
    with pytest.raises(SystemExit, match='^1$'), one_line_errors():
        MODELS.build(model_cfg(align_cfg='abc'))
    err = capsys.readouterr().err
    assert err.startswith('error: ') and err.count('\n') == 1 and \
        "(align_cfg) must be a dict of ['align_layers', " in err


@pytest.mark.parametrize('case', list(BAD_OPTIONS))
def test_options_are_checked(case):
    options, error, match = BAD_OPTIONS[case]
    with pytest.raises(error, match=match):
        model = MODELS.build(model_cfg(**options))
        assert case in IN_TRAINING  # the others fail at build
        model.train()
        model(**model.data_preprocessor(fake_batch(2), training=True),
              mode='loss')


# -------------------------------------------------------------- TransMix


def explicit_attention(vit, images, layer=-1):
    """(B, N, N): block ``layer``'s attention averaged over heads, the
    dense reference's (explicit softmax of its queries and keys)."""
    with attention_calls(vit) as calls, torch.no_grad():
        vit(images)
        return token_attention(*calls[layer][:3])[0].mean(1).float()


def official_transmix(attn, pixel_weights, targets):
    """TransMix's target, following Beckschen/TransMix transmix.py
    (``Mixup_transmix.transmix_label``): the pasted box's pixel mask
    nearest-downsampled to the token grid by ``nn.Upsample``, its attention
    share ``lam1`` and its clipped area ``lam0``, averaged.

    attn: (B, N) class-token attention to the patches; pixel_weights:
    (B, 2, H, W) of a CutMix batch (source 1 = the box); targets: (B, 2, C).
    """
    box = pixel_weights[0, 1]
    rows, cols = box.any(1).nonzero().flatten(), box.any(0).nonzero().flatten()
    H, W = box.shape
    yl, yh, xl, xh = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    lam0 = (yh - yl) * (xh - xl) / (H * W)
    mask = torch.zeros(H, W)
    mask[yl:yh, xl:xh] = 1
    n = int(math.sqrt(attn.shape[1]))
    mask = torch.nn.Upsample(size=n)(mask[None, None]).int()
    mask = mask.view(1, -1).repeat(len(attn), 1)
    w1, w2 = ((1 - mask) * attn).sum(1), (mask * attn).sum(1)
    lam = (lam0 + w2 / (w1 + w2)) / 2
    return targets[:, 0] * (1 - lam)[:, None] + targets[:, 1] * lam[:, None]


@pytest.mark.parametrize('kind', ['VisionTransformer',
                                  'DistilledVisionTransformer'])
def test_transmix_is_the_official_target_on_pixel_boxes(kind):
    """Issue 12: on TransMix's own pixel CutMix boxes (cutting through
    patches), target='transmix' is the official target to 1e-6 (a few
    float32 ulps of values below 1), with a distillation token too (the
    class token's attention to the patches only); the 'fractional' mask
    (each patch by the share of its pixels in the box) is not, and this
    shows by how much."""
    options = dict(target='transmix', head='DeiTClsHead' if 'Distilled'
                   in kind else 'VisionTransformerClsHead', backbone=dict(
                       type=kind, arch=ARCH, img_size=32, patch_size=PATCH))
    official = build(**options)
    # (build seeds its draws: the same weights)
    fractional = build(**options, transmix_cfg=dict(mask='fractional'))
    vit = official.backbone
    worst = cut = 0.
    for seed in range(1, 6):
        batch = mixed_batch(official, seed=seed)
        mix = batch['mix']
        pw, targets = mix.pixel_weights, mix.targets.float()
        cells = pw.reshape(*pw.shape[:2], 4, PATCH, 4, PATCH).mean(
            (3, 5)).flatten(2).transpose(1, 2)
        cut += bool(((cells > 0) & (cells < 1)).any())
        attn = explicit_attention(vit, batch['inputs'])[
            :, 0, vit.num_extra_tokens:]
        got = trained_target(official, batch)
        # labels in [0, 1], float32: 1e-6 is 8 ulp of 1 (sums in two orders)
        torch.testing.assert_close(got, official_transmix(attn, pw, targets),
                                   rtol=0, atol=1e-6)
        lam = transmix_lambda(attn, cells, mix.area_share)
        frac = trained_target(fractional,
                              mixed_batch(fractional, seed=seed))
        torch.testing.assert_close(
            frac, torch.einsum('bs,bsc->bc', lam, targets))
        worst = max(worst, (frac - got).abs().max().item())
    assert cut >= 3, 'too few boxes cut through patches'
    # The two rules differ by a few hundredths here (TransMix's attention
    # term itself moves the target by about 0.1).
    assert 0.005 < worst < 0.2, worst


@pytest.mark.parametrize('aug', ['TLMixup', 'TLPatchMix', 'TLResizeMix'])
def test_transmix_keeps_the_target_of_other_mixes(aug):
    """TransMix is defined for CutMix boxes only: the record's mode, not
    the mask, decides (patch mixing and ResizeMix are hard masks too).
    The batch comes from a preprocessor of that augment alone (a Mixup-only
    recipe is refused at build, test_a_recipe_tlalign_cannot_train_...)."""
    model = build('transmix', aug=aug if aug != 'TLMixup' else 'TLCutMix')
    model.data_preprocessor = MODELS.build(dict(
        model_cfg()['data_preprocessor'], type='TLAlignDataPreprocessor',
        batch_augments=dict(augments=[dict(type=aug, alpha=1.0)])))
    batch = mixed_batch(model)
    assert batch['mix'].mode == aug[2:].lower()
    expected = torch.stack([s.gt_score for s in batch['data_samples']])
    assert torch.equal(trained_target(model, batch), expected)


# ------------------------- what TL-Align cannot train, refused at build


def build_as_runner(tmp_path, recipe, model="dict(type='TLAlignClassifier')"):
    """A user's config, mmpretrain's ``recipe`` plus ``model = ...``, built
    as mmengine's Runner builds its model (the config's data preprocessor
    set as the model's default, ``MODELS.build`` in the default scope)."""
    from mmengine.config import Config
    from mmengine.registry import MODELS as ROOT
    from mmengine.registry import init_default_scope
    config = tmp_path / 'my_config.py'
    config.write_text(f"_base_ = ['mmpretrain::{recipe}']\nmodel = {model}\n")
    cfg = Config.fromfile(str(config))
    model = cfg.model
    if cfg.get('data_preprocessor') is not None:
        model.setdefault('data_preprocessor', cfg.data_preprocessor)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    return ROOT.build(model)


# recipe: the one message (the cause, and the fix)
REFUSED_RECIPES = {
    'resnet/resnet50_8xb32_in1k.py': 'TL-Align aligns labels through '
    'attention; ResNet has none. Train it with ImageClassifier',
    'convnext/convnext-tiny_32xb128_in1k.py': 'TL-Align aligns labels '
    'through attention; ConvNeXt has none',
    'mobilenet_v2/mobilenet-v2_8xb32_in1k.py': 'TL-Align aligns labels '
    'through attention; MobileNetV2 has none',
    'poolformer/poolformer-s12_32xb128_in1k.py': 'TL-Align aligns labels '
    'through attention; PoolFormer has none',
    'revvit/revvit-small_8xb256_in1k.py': 'TL-Align does not support '
    'RevVisionTransformer: its reversible blocks',
    'conformer/conformer-tiny-p16_8xb128_in1k.py': 'TL-Align does not '
    'support Conformer: its CNN and transformer streams exchange features '
    r'in every block \(FCUDown, FCUUp\) and its head classifies from both',
    # Mixup alone: every pixel carries the same mix
    'vision_transformer/vit-base-p16_64xb64_in1k.py': "only batch augment "
    "is Mixup, .*TL-Align's target is Mixup's. Add CutMix or ResizeMix to "
    'train_cfg.augments .*or train it with ImageClassifier',
    # no batch augment (it used to fail at the first step, after loading)
    'deit/deit-base_16xb32_in1k-384px.py': 'this recipe mixes none: give '
    r'the model train_cfg.augments, e.g. train_cfg=dict\(augments=',
}


@pytest.mark.parametrize('recipe', list(REFUSED_RECIPES))
def test_a_recipe_tlalign_cannot_train_is_refused_at_build(recipe,
                                                          tmp_path):
    with pytest.raises((NotImplementedError, ValueError),
                       match=REFUSED_RECIPES[recipe]):
        build_as_runner(tmp_path, recipe)


def test_the_recipe_check_reads_what_the_config_builds():
    """Spelt as a recipe may spell them (names, scoped names, classes), with
    probs: Mixup and a CutMix never drawn (probability 0) is Mixup alone;
    TransMix is refused alike; target='cutmix' (ImageClassifier's
    training) is not."""
    from mmpretrain.models.utils.batch_augments import CutMix, Mixup
    mixup_only = [dict(augments=[dict(type='mmpretrain.Mixup', alpha=.8)]),
                  dict(augments=[dict(type=Mixup, alpha=.8),
                                 dict(type=CutMix, alpha=1.)],
                       probs=[0.5, 0.])]
    for augments in mixup_only:
        for target in ('tlalign', 'transmix'):
            with pytest.raises(ValueError, match='only batch augment is '
                               'Mixup'):
                MODELS.build(model_cfg(target=target, train_cfg=augments))
        MODELS.build(model_cfg(target='cutmix', train_cfg=augments))
    MODELS.build(model_cfg(train_cfg=dict(augments=[
        dict(type=Mixup, alpha=.8), dict(type=CutMix, alpha=1.)],
        probs=[0.5, 0.5])))


def test_the_one_line_on_a_mixup_and_cutmix_recipe_builds(tmp_path):
    model = build_as_runner(tmp_path, 'deit/deit-tiny_4xb256_in1k.py')
    assert [type(a).__name__ for a in model.data_preprocessor
            .batch_augments.augments] == ['TLMixup', 'TLCutMix']


def one_line(backbone=None, head=None, **more):
    """The one line, ``model = dict(type='TLAlignClassifier')``, with
    overrides of the recipe's backbone and head (a tiny arch)."""
    return repr(dict(type='TLAlignClassifier', **{k: v for k, v in dict(
        backbone=backbone, head=head).items() if v is not None}, **more))


def tiny_arch(arch, width, **backbone):
    """The one line with a tiny arch of the recipe's backbone, for 64 px
    inputs, the head's width to match."""
    return one_line(dict(arch=dict(_delete_=True, **arch), **backbone),
                    dict(in_channels=width))


TWINS_TINY = dict(embed_dims=[8, 8, 16, 16], depths=[1, 1, 1, 1],
                  num_heads=[1, 1, 2, 2], patch_sizes=[4, 2, 2, 2],
                  strides=[4, 2, 2, 2], mlp_ratios=[2, 2, 2, 2],
                  sr_ratios=[8, 4, 2, 1])
# Issue 43's "Done when", one row per new family. recipe: (the one line,
# made tiny by its overrides, the input side). By hand at the recipes' own
# sizes: docs/design.md's table of mmpretrain's backbones.
OWN_CONFIGS = {
    'eva02/eva02-tiny-p14_in1k.py': (tiny_arch(dict(
        embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64),
        32, img_size=56), 56),
    'hivit/hivit-tiny-p16_16xb64_in1k.py': (tiny_arch(dict(
        embed_dims=64, depths=[1, 1, 7], num_heads=2), 64, img_size=64,
        out_indices=[6]), 64),
    't2t_vit/t2t-vit-t-14_8xb64_in1k.py': (one_line(dict(
        img_size=64, embed_dims=32, num_layers=2, t2t_cfg=dict(token_dims=16),
        layer_cfgs=dict(num_heads=2, feedforward_channels=64)),
        dict(in_channels=32)), 64),
    'twins/twins-pcpvt-small_8xb128_in1k.py': (tiny_arch(TWINS_TINY, 16),
                                               64),
    'twins/twins-svt-small_8xb128_in1k.py': (tiny_arch(dict(
        TWINS_TINY, window_sizes=[4, 4, 4, 4]), 16), 64),
    'davit/davit-tiny_4xb256_in1k.py': (tiny_arch(dict(
        embed_dims=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2]), 64,
        window_size=2), 64),
    # (its recipe has no batch augment: refused without one, below)
    'tinyvit/tinyvit-5m_8xb256_in1k.py': (one_line(
        dict(arch=dict(_delete_=True, channels=[8, 8, 16, 16],
                       num_heads=[1, 1, 2, 2], depths=[1, 1, 1, 1]),
             img_size=(64, 64), window_size=[2, 2, 2, 2]),
        dict(in_channels=16),
        train_cfg=dict(augments=[dict(type='CutMix', alpha=1.0)])), 64),
    # the recipes' own archs at 64 px
    'mvit/mvitv2-tiny_8xb256_in1k.py': (one_line(dict(img_size=64)), 64),
    # (mmpretrain's LeViTClsHead raises in training with distillation=True,
    # its default in this config, with ImageClassifier too)
    'levit/levit-128s_8xb256_in1k.py': (one_line(
        dict(img_size=64), dict(distillation=False)), 64),
    'xcit/xcit-nano-12-p16_8xb128_in1k.py': (one_line(), 64),
}


@pytest.mark.parametrize('recipe', list(OWN_CONFIGS))
def test_the_one_line_on_a_new_familys_own_config_trains(recipe, tmp_path):
    """mmpretrain's own config plus the one line (made tiny), built as the
    Runner builds it, trains one CutMix step of its own batch augments; on
    structured weights (attention far from uniform) the TL-Align target
    differs from the area target."""
    line, side = OWN_CONFIGS[recipe]
    torch.manual_seed(0)  # (mmpretrain's initialisation draws)
    model = build_as_runner(tmp_path, recipe, line)
    assert 'TLCutMix' in [type(a).__name__ for a in model.data_preprocessor
                          .batch_augments.augments]
    model.init_weights()
    zoo.randomise(model.backbone)
    model.train()
    for seed in range(20):  # the recipe's CutMix, a box of 20-80 %,
        np.random.seed(seed)  # each image mixed with the other one
        torch.manual_seed(seed)
        batch = model.data_preprocessor(fake_batch(2, 1000, seed, side),
                                        training=True)
        area = torch.stack([s.gt_score for s in batch['data_samples']])
        if batch['mix'].mode == 'cutmix' and (area.amax(-1) < 1).all() \
                and 0.2 < batch['mix'].area_share[0, 0] < 0.8:
            break
    assert batch['mix'].mode == 'cutmix' and (area.amax(-1) < 1).all()
    area = area.clone()
    before = [p.detach().clone() for p in model.parameters()]
    optim = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    given = head_samples(model)
    loss = model.parse_losses(model(**batch, mode='loss'))[0]
    assert torch.isfinite(loss)
    optim.update_params(loss)
    aligned = torch.stack([s.gt_score for s in given])
    assert (aligned - area).abs().max() > 1e-3
    torch.testing.assert_close(aligned.sum(-1), torch.ones(len(aligned)))
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(),
                                                      before))


def test_tinyvit_s_recipe_has_no_batch_augment(tmp_path):
    with pytest.raises(ValueError, match='this recipe mixes none'):
        build_as_runner(tmp_path, 'tinyvit/tinyvit-5m_8xb256_in1k.py')


# ------------------- the wrapper spelling: TLAlignBackbone, unwrapped

VIT = model_cfg()['backbone']


def test_the_wrapper_is_a_spelling_of_the_one_line():
    """Its options go to align_cfg (one home: merged with align_cfg's
    other keys), its init_cfg into the backbone config; the model is the
    one-line one: the plain backbone, the same state dict keys."""
    init = dict(type='TruncNormal', layer='Linear', std=.02)
    wrapped = build(backbone=dict(type='TLAlignBackbone', backbone=VIT,
                                  align_layers='last', residual_norm=False,
                                  init_cfg=init),
                    align_cfg=dict(impl='explicit'))
    plain = build(backbone=dict(VIT, init_cfg=init), align_cfg=dict(
        align_layers='last', residual_norm=False, impl='explicit'))
    assert wrapped.align_cfg == plain.align_cfg
    assert type(wrapped.backbone) is type(plain.backbone)
    assert wrapped.backbone.init_cfg == init
    assert list(wrapped.state_dict()) == list(plain.state_dict())
    batch = mixed_batch(plain)
    assert torch.equal(trained_target(wrapped, batch),
                       trained_target(plain, batch))


WRAPPER_REFUSED = {  # name: (model_cfg's arguments, error, match)
    'an option also in align_cfg': (dict(
        backbone=dict(type='TLAlignBackbone', backbone=VIT,
                      align_layers='last'),
        align_cfg=dict(align_layers='last')), ValueError,
        r"options \['align_layers'\] are given twice.*keep one home"),
    'an option checked as in align_cfg': (dict(backbone=dict(
        type='TLAlignBackbone', backbone=VIT, residual_norm='no')),
        TypeError, 'residual_norm must be True or False'),
    'a backbone option beside the backbone': (dict(backbone=dict(
        type='TLAlignBackbone', backbone=VIT, drop_path_rate=0.1)),
        ValueError, r"\['drop_path_rate'\] are none of them.*inside "
        r'backbone=dict\(...\).*_delete_=True'),
    'in a plain ImageClassifier': (dict(
        type='ImageClassifier', aug='CutMix',
        backbone=dict(type='TLAlignBackbone', backbone=VIT)), ValueError,
        "TLAlignBackbone is unwrapped by TLAlignClassifier.*set the model's "
        "type='TLAlignClassifier'"),
}


@pytest.mark.parametrize('case', list(WRAPPER_REFUSED))
def test_what_the_wrapper_cannot_spell_is_refused(case):
    options, error, match = WRAPPER_REFUSED[case]
    with pytest.raises(error, match=match):
        MODELS.build(model_cfg(**options))


def test_the_wrapper_on_an_mmpretrain_recipe(tmp_path):
    """On a recipe, mmengine merges the recipe's backbone keys into the
    wrapper: those its backbone config repeats are the same and left out;
    one it sets otherwise is refused, naming the fix."""
    inner = ("dict(type='VisionTransformer', arch='deit-tiny', "
             "img_size=224, patch_size={})")
    model = build_as_runner(
        tmp_path, 'deit/deit-tiny_4xb256_in1k.py',
        "dict(type='TLAlignClassifier', backbone=dict(type='TLAlignBackbone',"
        f" backbone={inner.format(16)}, align_layers='last'))")
    assert type(model.backbone).__name__ == 'VisionTransformer'
    assert model.align_cfg.align_layers == 'last'
    with pytest.raises(ValueError, match=r"\['patch_size'\] are none of "
                       'them, nor the same in its backbone'):
        build_as_runner(
            tmp_path, 'deit/deit-tiny_4xb256_in1k.py',
            "dict(type='TLAlignClassifier', backbone=dict(type="
            f"'TLAlignBackbone', backbone={inner.format(8)}))")
