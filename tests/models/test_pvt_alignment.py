"""TL-Align through mmdet's PVT / PVTv2 (built from mmpretrain's registry
as ``mmdet.*``) against a dense reference."""
import pytest
import torch
from mmpretrain.registry import MODELS

from tlalign_mm.models import aligned_forward, describe

from .dense_reference_pvt import dense_pvt_labels
from .mixes import assert_history_close, random_mix

# Head dims 8; 64x64 input: 16, 8, 4, 2 tokens a side (v2).
ARCH = dict(embed_dims=8, num_layers=[2, 1, 1, 1], num_heads=[1, 2, 2, 4],
            mlp_ratios=[2, 2, 2, 2], out_indices=(3, ), drop_path_rate=0.)


def build_pvt(version=2, sharpen=4.0, seed=0, **kwargs):
    torch.manual_seed(seed)
    cfg = dict(type='mmdet.PyramidVisionTransformerV2' if version == 2 else
               'mmdet.PyramidVisionTransformer', **ARCH)
    if version == 1:
        cfg['pretrain_img_size'] = 64
    cfg.update(kwargs)
    pvt = MODELS.build(cfg)
    with torch.no_grad():
        for stage in pvt.layers:
            for block in stage[1]:
                if hasattr(block, 'attn'):
                    mha = block.attn.attn
                    # Sharpen the attention: scale the q and k projections.
                    mha.in_proj_weight[:2 * mha.embed_dim] *= sharpen
                else:
                    block.pos_embed.normal_(0, 0.5)
    pvt.eval()
    return pvt


CASES = [
    dict(name='v2 64x64 S=2', S=2, size=(64, 64)),
    # 18, 9, 5, 3 tokens a side; the 8x8 reduction of 18x18 leaves 2 rows
    # and columns out.
    dict(name='v2 70x70 S=3', S=3, size=(70, 70)),
    dict(name='v2 cutmix box', S=2, size=(64, 64), box=(5, 37, 11, 50)),
    dict(name='v2 stage 1 readout', S=2, size=(64, 64), out_indices=(0, 1)),
    # Non-overlapping 4/2/2/2 embeddings (17, 8, 4, 2), position embedding.
    dict(name='v1 70x70', S=2, size=(70, 70), version=1),
]


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_matches_dense_reference(case):
    case = dict(case)
    _, S, (H, W), box = (case.pop('name'), case.pop('S'), case.pop('size'),
                            case.pop('box', None))
    pvt = build_pvt(**case)
    assert 'reduction' in {t.kind for t in describe(pvt).taps}
    images, pw, targets = random_mix(2, S, H, W, box=box)
    aligned = aligned_forward(pvt, images, pw, keep_history=True)
    ref, ref_history, ref_feat = dense_pvt_labels(pvt, images, pw, targets)
    assert (aligned.feats[-1].double() - ref_feat).abs().max() < 1e-4
    assert (aligned.expand(targets).double() - ref).abs().max() <= 1e-5
    assert_history_close(aligned.history, ref_history, 6, targets)
    assert (ref_history[1] - ref_history[0]).abs().max() > 1e-2


def test_tokens_are_the_plain_forward_and_labels_skip_dropout():
    pvt = build_pvt(drop_path_rate=0.5, attn_drop_rate=0.3)
    images, pw, _ = random_mix(2, 2, 64, 64)
    evaluated = aligned_forward(pvt, images, pw, keep_history=True)
    assert torch.equal(evaluated.feats[0], pvt(images)[0])
    pvt.train()
    torch.manual_seed(5)
    plain = pvt(images)[0]
    torch.manual_seed(5)
    trained = aligned_forward(pvt, images, pw, keep_history=True,
                             follow_drop_path=False)
    assert torch.equal(trained.feats[0], plain)
    # Block 0 (drop-path rate 0) sees the eval attention; its attention
    # dropout changes the tokens, not the labels. Two float32 softmaxes of
    # the same logits (MHA's weights; ours from re-projected q, k) differ
    # relatively by ~eps32 times the logit range (< 40 here), and so do the
    # labels (Y + AY) / 2 >= AY / 2; dropped attention would move them ~0.1.
    torch.testing.assert_close(trained.history[1], evaluated.history[1],
                               atol=0, rtol=40 * 2**-23)
    assert (trained.history[2] - evaluated.history[2]).abs().max() > 1e-4
