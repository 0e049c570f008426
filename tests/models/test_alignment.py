"""TL-Align through every family against the dense reference
(:mod:`.dense`): labels after every block and the final label, in class
space, with the labels moved far beyond the tolerance.

A new family is a row of :data:`CASES` with its facts for the reference
(``facts=dense.Facts(...)``, docs/design.md "Adding a family"), and its
name in ``test_every_backbone.NAMES`` for the training and recording
properties."""
from typing import NamedTuple, Tuple

import pytest
import timm
import torch
from mmpretrain.models.backbones.hivit import Attention as HiViTAttention
from mmpretrain.models.backbones.twins import LocallyGroupedSelfAttention
from mmpretrain.models.backbones.vit_eva02 import AttentionWithRoPE
from mmpretrain.models.utils import LeAttention

from tlalign_mm import align_labels
from tlalign_mm.models import aligned_forward

from . import dense, dense_queries, zoo
from .dense import Facts, dense_reference, patch_means, window_means
from .zoo import build, in_classes, random_mix

V2 = zoo.SWIN_V2
BOX = (3, 21, 5, 30)
EVA02 = Facts(attentions=(AttentionWithRoPE, ), attention=dense.rope_attention)


def hivit_facts(embed):
    """HiViT's: its attention computes as BEiT's (the default), the first
    attention's tokens are 16 px patches labelled by ``embed``, no extra
    tokens, the head reads their mean."""
    return Facts(attentions=(HiViTAttention, ), embed=embed, prefix=0,
                 readout=lambda labels: labels.mean(1))


def stem_means(pixel_labels):
    """A 6x6 stem conv at stride 4, padding 1: each 4x4-pixel inner token
    its window's mean, a 16 px patch the mean of its 4x4 inner tokens."""
    B, H, W, C = pixel_labels.shape
    inner = window_means(pixel_labels, (H // 4, W // 4), 6, 4, 1)
    return inner.reshape(B, H // 16, 4, W // 16, 4, C).mean((2, 4)).reshape(
        B, -1, C)



class Case(NamedTuple):
    """A backbone config, its sources, ``(H, W)``, CutMix box, the
    ``aligned_forward`` options and the family's facts for the reference."""
    cfg: object
    S: int
    size: Tuple[int, int]
    box: object
    options: dict
    facts: Facts


def case(cfg, S=2, size=(32, 32), box=None, facts=Facts(), **options):
    return Case(cfg, S, size, box, options, facts)


TWINS = Facts(attentions=(LocallyGroupedSelfAttention, ),
              layout=dense.twins_layout)
DAVIT = Facts(layout=dense.davit_layout)
TINYVIT = Facts(attentions=(LeAttention, ), layout=dense.tinyvit_layout,
                keeps_before_attention=True)

# name: Case. Each row is a label path: extra tokens, padding, shift on/off,
# merges (before/after a stage's blocks), spatial reduction, SPT views, LSA.
CASES = {
    'ViT cls, box': case(zoo.VIT, box=BOX),
    'ViT pooled, no cls, not a multiple of the patch': case(dict(zoo.VIT,
        out_type='avg_featmap', with_cls_token=False), S=3, size=(36, 29)),
    'DeiT distilled, other size': case(dict(zoo.VIT,
        type='DistilledVisionTransformer'), S=3, size=(48, 40)),
    'ViT given area share (where the class token starts)': case(zoo.VIT,
        box=BOX, area_share=torch.tensor([[0.7, 0.3], [0.2, 0.8]])),
    'ViT last block only': case(zoo.VIT, box=BOX, align_layers='last'),
    'ViT blocks 0 and 2, no residual average': case(zoo.VIT, box=BOX,
        align_layers=[0, 2], residual_norm=False),
    'DeiT3 (not named by the package)': case(dict(zoo.VIT, type='DeiT3'),
        box=BOX),
    'ViT-like class (not named by the package)': case(dict(type='TinyViTLike'),
        S=3),
    'BEiT relative bias, pooled': case(zoo.BEIT, box=BOX),
    'BEiT shared bias, cls, final norm': case(dict(zoo.BEIT,
        out_type='cls_token', use_rel_pos_bias=False,
        use_shared_rel_pos_bias=True, final_norm=True), S=3),
    'BEiT absolute, no layer scale, no cls': case(dict(zoo.BEIT,
        with_cls_token=False, use_rel_pos_bias=False, use_abs_pos_emb=True,
        layer_scale_init_value=0.), S=3),
    # 18x18 tokens padded to 21x21, then 9x9 padded to 14x14; the box's
    # token edges cut 2x2 merge groups.
    'Swin padded, box': case(zoo.SWIN, size=(70, 70), box=(13, 45, 21, 59)),
    # 14x21 tokens, then 7x11: the map equals the window in stage 2 (shift
    # off), W still padded.
    'Swin map equals window': case(zoo.SWIN, S=3, size=(56, 84)),
    'Swin pad_small_map, 3 stages': case(dict(zoo.SWIN, arch=zoo.SWIN3,
        out_indices=(2, ), pad_small_map=True), size=(70, 70)),
    'Swin out_after_downsample, no residual average': case(dict(zoo.SWIN,
        out_indices=(0, ), out_after_downsample=True), S=3, size=(62, 70),
        residual_norm=False),
    'Swin V2 padded, box': case(V2, size=(70, 70), box=(13, 45, 21, 59)),
    'Swin V2 map equals window': case(V2, S=3, size=(32, 48)),
    'Swin V2 pad_small_map, window 8': case(dict(V2, arch=dict(zoo.SWIN3,
        extra_norm_every_n_blocks=0), out_indices=(2, ), window_size=8,
        pad_small_map=True, pretrained_window_sizes=[0] * 3), size=(70, 70)),
    'Swin V2 window per stage, pretrained window': case(dict(V2,
        window_size=[3, 4], pretrained_window_sizes=[6, 0]), size=(70, 70)),
    'Swin V2 readout of stages 0 and 1, extra norm': case(dict(V2,
        out_indices=(0, 1), arch=dict(V2['arch'],
        extra_norm_every_n_blocks=1)), S=3, size=(62, 74)),
    # 18, 9, 5, 3 tokens a side; the 8x8 reduction of 18x18 leaves two
    # rows and columns out.
    'PVT v2': case(zoo.PVT, S=3, size=(70, 70)),
    'PVT v2 box, stage 1 readout': case(dict(zoo.PVT, out_indices=(0, 1)),
        size=(64, 64), box=(5, 37, 11, 50)),
    'PVT v1 (position embedding)': case(dict(zoo.PVT, pretrain_img_size=64,
        type='mmdet.PyramidVisionTransformer'), size=(70, 70)),
    'SL-ViT cls, box': case(zoo.SL_VIT, box=(5, 23, 3, 18)),
    'SL-ViT pooled, corner padding': case(dict(zoo.SL_VIT,
        out_type='avg_featmap'), S=3, size=(30, 27)),
    "SL-ViT SPT only, label_views='centre'": case(dict(zoo.SL_VIT,
        use_lsa=False, spt_cfg=dict(label_views='centre')), box=BOX),
    'SL-ViT LSA only': case(dict(zoo.SL_VIT, use_spt=False), box=BOX),
    'SL-Swin box': case(zoo.SL_SWIN, box=(3, 19, 9, 30)),
    # 15x15 tokens (windows padded to 16), SPT pooling pads 15 -> 16.
    'SL-Swin padded everywhere': case(zoo.SL_SWIN, S=3, size=(30, 30)),
    'SL-Swin LSA only, out after downsample': case(dict(zoo.SL_SWIN,
        use_spt=False, out_indices=(1, ), out_after_downsample=True)),
    'SL-Swin SPT only': case(dict(zoo.SL_SWIN, use_lsa=False)),
    'EVA-02 RoPE, pooled': case(zoo.EVA02, S=3, facts=EVA02),
    'EVA-02 class token readout, box': case(dict(zoo.EVA02,
        out_type='cls_token'), box=BOX, facts=EVA02),
    'EVA-02 no class token, other size': case(dict(zoo.EVA02,
        with_cls_token=False), S=3, size=(48, 40), facts=EVA02),
    'HiViT relative bias': case(zoo.HIVIT, S=3, size=(64, 64),
        facts=hivit_facts(lambda pix: patch_means(pix, 16))),
    # the stem conv's windows overlap (and pad) across 16 px patches
    'HiViT overlapping stem conv, box': case(dict(zoo.HIVIT, rpe=False,
        kernel_size=6, pad_size=1), size=(64, 64), box=(9, 45, 21, 59),
        facts=hivit_facts(stem_means)),
    'T2T-ViT cls': case(zoo.T2T, S=3, size=(64, 64),
        facts=Facts(layout=dense.t2t_layout)),
    # 15x13 tokens, 8x7, 4x4: every soft split pads
    'T2T-ViT pooled, no cls, box, padded': case(dict(zoo.T2T,
        with_cls_token=False, out_type='avg_featmap'), size=(60, 52),
        box=(9, 41, 5, 30), facts=Facts(layout=dense.t2t_layout)),
    'timm DeiT, fused': case(dict(zoo.TIMM, fused=True), box=BOX),
    'timm distilled DeiT, explicit': case(dict(zoo.TIMM,
        model_name='deit_tiny_distilled_patch16_224', depth=3, fused=False),
        box=BOX),
    'timm DeiT3 (layer scale, no_embed_class), fused': case(dict(zoo.TIMM,
        model_name='deit3_small_patch16_224', fused=True), S=3),
    'timm registers, qk-norm, avg, explicit': case(dict(zoo.TIMM, reg_tokens=4,
        qk_norm=True, global_pool='avg', fused=False), S=3),
    'timm no class token, registers, fused': case(dict(zoo.TIMM,
        class_token=False, reg_tokens=2, global_pool='avg', fused=True), S=3),
    'timm avg over prefix too, explicit': case(dict(zoo.TIMM,
        global_pool='avg', pool_include_prefix=True, fused=False), S=3),
    'timm dynamic size, padded, fused': case(dict(zoo.TIMM,
        dynamic_img_size=True, dynamic_img_pad=True, fused=True), S=3,
        size=(36, 29)),
    # DeiT-Tiny's geometry: 197 tokens, heads of 64 (the labels' SDPA path)
    'timm DeiT-Tiny at 224, fused': case(dict(zoo.TIMM, img_size=224,
        patch_size=16, embed_dim=192, num_heads=3), size=(224, 224), box=(30,
        150, 45, 190)),
    # 18x18 tokens (corner padded), keys reduced 2x2 to 9x9; then 5x5
    'Twins PCPVT': case(zoo.TWINS_PCPVT, S=3, size=(70, 70),
                        facts=TWINS),
    'Twins PCPVT box, not a multiple of the patch': case(zoo.TWINS_PCPVT,
        size=(62, 62), box=(3, 21, 5, 30), facts=TWINS),
    # LSA windows of 4 over 18x18 (both sides padded, masked), then 9x9
    'Twins SVT': case(zoo.TWINS_SVT, S=3, size=(70, 70), facts=TWINS),
    # 16x18, then 8x9: one side padded, which mmpretrain's mask leaves
    # unmasked: padded keys are attended
    'Twins SVT one side padded, last block only': case(zoo.TWINS_SVT,
        size=(64, 72), facts=TWINS, align_layers='last'),
    # 14x14 tokens in windows of 4 (padded, attended), then 7x7
    'DaViT': case(zoo.DAVIT, S=3, size=(56, 56), facts=DAVIT),
    'DaViT box, unpadded': case(zoo.DAVIT, size=(64, 64), box=BOX,
                                facts=DAVIT),
    # 16x16 MBConv tokens, merged to 8x8 in windows of 3 (padded,
    # attended), then 4x4 in one window of 4 (the block's unpartitioned
    # path)
    # (a random mix of 3x3-pixel cells is smoothed away by the stem and
    # merges: a box)
    'TinyViT': case(zoo.TINYVIT, size=(64, 64), box=(5, 37, 11, 50),
                    facts=TINYVIT),
    'TinyViT box, blocks 1 and 2 (not the MBConv slot), no residual '
    'average': case(zoo.TINYVIT, size=(64, 64), box=BOX, facts=TINYVIT,
                    align_layers=[1, 2], residual_norm=False),
    'timm ResPostBlock, explicit': case(dict(zoo.TIMM,
        block_fn=timm.models.vision_transformer.ResPostBlock, fused=False),
        S=3),
    # Queries that are not the tokens (dense_queries.py): pooled queries,
    # max-pool skips, residual pooling, relative positions folded into q, k
    'MViTv2 box': case(zoo.MVIT, size=(64, 64), box=(5, 37, 11, 50),
                       facts=dense_queries.MVIT),
    # 20x16 tokens: the relative position tables resized; a stage-1 readout
    'MViTv2 other size, no residual pooling, dims in MLPs': case(dict(
        zoo.MVIT, residual_pooling=False, dim_mul_in_attention=False,
        out_scales=[1]), S=3, size=(80, 64), facts=dense_queries.MVIT),
    'MViTv2 blocks 1 and 2 (pooled by those that do not align)': case(
        zoo.MVIT, size=(64, 64), box=(5, 37, 11, 50),
        facts=dense_queries.MVIT, align_layers=[1, 2]),
    'LeViT subsampling, box': case(zoo.LEVIT, size=(128, 128),
                                   box=(9, 70, 30, 111),
                                   facts=dense_queries.LEVIT),
    'LeViT stage 0 out, other box': case(dict(zoo.LEVIT, out_indices=(0, )),
                                         size=(128, 128), box=(10, 70, 20,
                                                               100),
                                         facts=dense_queries.LEVIT),
    'LeViT no residual average': case(zoo.LEVIT, size=(128, 128), box=(
        10, 70, 20, 100), facts=dense_queries.LEVIT, residual_norm=False),
    'XCiT class attention, box': case(zoo.XCIT, box=(5, 37, 11, 50),
                                      size=(64, 64), facts=dense_queries.XCIT),
    'XCiT patch 8, patch mean': case(dict(
        zoo.XCIT, patch_size=8, img_size=48, out_type='avg_featmap'), S=3,
        size=(48, 48), facts=dense_queries.XCIT),
    'XCiT blocks 0 and 3': case(zoo.XCIT, box=(5, 37, 11, 50),
                                size=(64, 64), facts=dense_queries.XCIT,
                                align_layers=[0, 3]),
}


def assert_history_close(history, reference, targets, atol=1e-5):
    """float32 labels against float64 ones: 1e-5 on values of at most 1,
    room for ~100 float32 ulps of rounding over the blocks' sums; a wrong
    rule, token or padding moves labels by > 1e-3 (the cases' guards)."""
    assert len(history) == len(reference)
    for ours, theirs in zip(history, reference):
        assert (in_classes(ours, targets) - theirs).abs().max() <= atol


@pytest.mark.parametrize('name', list(CASES))
def test_matches_dense_reference(name):
    cfg, S, (H, W), box, options, facts = CASES[name]
    model = build(cfg)
    images, pw, targets = random_mix(2, S, H, W, box=box)
    rule = {k: v for k, v in options.items() if k != 'area_share'}
    aligned = aligned_forward(model, images, pw, options.get('area_share'),
                              rule, keep_history=True)
    ref, ref_history = dense_reference(model, images, pw, targets, facts,
                                       **options)
    assert_history_close(aligned.history, ref_history, targets)
    assert (aligned.expand(targets).double() - ref).abs().max() <= 1e-5
    # the public entry point is the same computation
    assert torch.equal(align_labels(model, images, pw, targets, **options),
                       aligned.expand(targets))
    # The labels moved: tokens in a block, and the final label away from
    # the area (CutMix) label by 10x the tolerance (pooled readouts of
    # random mixes move least).
    moved = max((b - a).abs().max() for a, b in zip(ref_history,
                                                    ref_history[1:])
                if a.shape == b.shape)
    assert moved > 1e-2
    area = in_classes(pw.mean((2, 3)), targets)
    assert (ref - area).abs().max() > 1e-4
    if options:  # the option changed the labels
        full, _ = dense_reference(model, images, pw, targets, facts)
        assert (ref - full).abs().max() > 1e-3


@pytest.mark.parametrize('name', ['Swin padded, box', 'SL-ViT LSA only'])
def test_padding_rule_and_lsa_mask_are_what_is_tested(name, monkeypatch):
    """Ignoring the padded keys' share (no renormalisation; on 70x70 real
    tokens attend to padded ones), or LSA's mask and temperature, gives the
    reference other labels, far beyond the tolerance."""
    cfg, S, (H, W), box, _, _ = CASES[name]
    model = build(cfg)
    images, pw, targets = random_mix(2, S, H, W, box=box)
    _, ours = dense_reference(model, images, pw, targets)
    monkeypatch.setattr(dense, '_update', lambda Y, AY, r, n=False:
                        (Y + AY) / 2)
    for layer in getattr(model, 'layers', []):  # (SL-ViT: unpadded)
        layer.attn.diagonal_masking = False
        with torch.no_grad():
            layer.attn.scale.fill_(layer.attn.head_dims**-0.5)
    _, other = dense_reference(model, images, pw, targets)
    assert max((a - b).abs().max() for a, b in zip(ours, other)) > 1e-3


def _swin_v2_without_merging_rule(monkeypatch):
    from tlalign_mm.registry import TOKEN_RULES
    monkeypatch.delitem(TOKEN_RULES.module_dict,
                        'mmpretrain.models.utils.embed.PatchMerging')
    return build(zoo.SWIN_V2)


def timm_model(name='deit_tiny_patch16_224', **kwargs):
    tiny = dict(img_size=32, patch_size=8, embed_dim=32, depth=1,
                num_heads=2) if name.startswith('deit') else {}
    return lambda mp: timm.create_model(name, pretrained=False,
                                        **dict(tiny, **kwargs))


def distilled_training(mp):
    model = build(dict(zoo.TIMM, model_name='deit_tiny_distilled_patch16_224'))
    model.timm_model.set_distilled_training(True)
    return model


def hivit_after_a_deeper_one(mp):
    """A HiViT on mmpretrain's default out_indices, then a deeper one
    built: the default list, shared, now names the deeper one's last
    block."""
    cfg = {k: v for k, v in zoo.HIVIT.items() if k != 'out_indices'}
    first = build(cfg)
    build(dict(cfg, arch=dict(cfg['arch'], depths=[1, 1, 10])))
    return first


TIMM_SWIN = dict(img_size=32, embed_dim=16, depths=(1, 1), num_heads=(1, 2),
                 model_name='swin_tiny_patch4_window7_224')
BAD = {  # name: (backbone, call's changes, error, match)
    'pixel weights sum to 2': (zoo.VIT, dict(pw=lambda pw: 2 * pw),
                               ValueError, 'sum to 1'),
    'pixel weights of another size': (zoo.VIT, dict(
        pw=lambda pw: pw[..., :16]), ValueError, 'height/width'),
    'targets of one source': (zoo.VIT, dict(targets=lambda t: t[:, :1]),
                              ValueError, r'targets must be \(B, S, C\)'),
    'area_share of 3 sources': (zoo.VIT, dict(area_share=torch.full(
        (2, 3), 1 / 3)), ValueError, r'area_share must be \(B, S\)'),
    'area_share summing to 2': (zoo.VIT, dict(area_share=torch.ones(2, 2)),
                                ValueError, 'area_share .* sum to 1'),
    'ViT featmap readout': (dict(zoo.VIT, out_type='featmap'), {},
                            ValueError, 'out_type'),
    'ViT out_indices before the last block': (
        dict(zoo.VIT, out_indices=[0]), {}, NotImplementedError,
        r'outputs blocks \[0\] of 3 .*Use out_indices=-1'),
    'BEiT out_indices before the last block': (
        dict(zoo.BEIT, out_indices=[1]), {}, NotImplementedError,
        'out_indices=-1'),
    'HiViT whose shared out_indices moved': (
        hivit_after_a_deeper_one, {}, ValueError, r"HiViT's last block \(6\), "
        r'but out_indices=\[9\] .*Pass out_indices=\[6\]'),
    'Swin without an output stage': (dict(zoo.SWIN, out_indices=()), {},
                                     ValueError, 'out_indices'),
    'Swin V2 with an unregistered merge': (_swin_v2_without_merging_rule, {},
                                           NotImplementedError,
                                           'PatchMerging'),
    'a Conv2d': (lambda mp: torch.nn.Conv2d(3, 3, 1), {},
                 NotImplementedError,
                 'TL-Align aligns labels through attention; Conv2d has none'),
    'align_layers out of range': (zoo.VIT, dict(align_layers=[7]),
                                  ValueError, 'out of range'),
    "align_layers='first'": (zoo.VIT, dict(align_layers='first'), ValueError,
                             "'all', 'last'"),
    # timm: the VisionTransformer family only, and what it can label
    'TIMMBackbone of a ViT': (dict(zoo.TIMM, type='TIMMBackbone'), {},
                              ValueError, "type='PooledTIMMBackbone'"),
    'TIMMBackbone of a Swin': (dict(TIMM_SWIN, type='TIMMBackbone'), {},
                               NotImplementedError,
                               "timm's Swin .*type='SwinTransformer'"),
    'bare timm ResNet': (timm_model('resnet18'), {}, NotImplementedError,
                         'through attention; ResNet has none'),
    'timm Eva (no family)': (timm_model('eva02_tiny_patch14_224',
                                        img_size=28, depth=1),
                             {}, NotImplementedError, 'no family for Eva: '
                             r'none describes its attention \(timm.models'
                             r'.eva.EvaAttention\)'),
    'timm PatchDropout': (timm_model(patch_drop_rate=0.5), {},
                          NotImplementedError, 'PatchDropout'),
    'timm DiffAttention': (timm_model(attn_layer='diff'), {},
                           NotImplementedError,
                           'block 0 is a Block with DiffAttention'),
    'timm ParallelScalingBlock': (timm_model(
        block_fn=timm.models.vision_transformer.ParallelScalingBlock), {},
        NotImplementedError, 'block 0 is a ParallelScalingBlock'),
    "timm global_pool='map'": (timm_model(global_pool='map'), {},
                               NotImplementedError, "global_pool='map'"),
    "timm global_pool='max'": (dict(zoo.TIMM, global_pool='max'), {},
                               ValueError, 'global_pool must be one of'),
    'timm distilled, avg pool': (dict(
        zoo.TIMM, global_pool='avg',
        model_name='deit_tiny_distilled_patch16_224'), {}, ValueError,
        'timm refused'),
    'timm distilled training': (distilled_training, {}, NotImplementedError,
                                'distilled_training'),
    'XCiT out_indices before its last layer': (dict(zoo.XCIT, out_indices=(
        2, )), {}, NotImplementedError, r'out_indices=\(-1, \)'),
    'XCiT featmap readout': (dict(zoo.XCIT, out_type='featmap'), {},
                             NotImplementedError, "out_type='cls_token' or"),
    'XCiT without class attention': (dict(zoo.XCIT, cls_attn_layers=0,
                                          out_indices=(1, )), {},
                                     NotImplementedError,
                                     'cls_attn_layers > 0'),
}


@pytest.mark.parametrize('name', list(BAD))
def test_bad_input_is_a_clear_error(name, monkeypatch):
    cfg, changes, error, match = BAD[name]
    images, pw, targets = random_mix(2, 2, 32, 32)
    changes = dict(changes)
    pw = changes.pop('pw', lambda pw: pw)(pw)
    targets = changes.pop('targets', lambda t: t)(targets)
    with pytest.raises(error, match=match):  # at build or at the call
        model = cfg(monkeypatch) if callable(cfg) else build(cfg)
        align_labels(model, images, pw, targets, **changes)
