"""TL-Align through mmpretrain's SwinTransformer against a dense reference."""
import pytest
import torch
import torch.nn as nn
from mmpretrain.registry import MODELS

from tlalign_mm import align_labels
from tlalign_mm.models import aligned_forward, describe

from .dense_reference_swin import (
    dense_swin_labels,
    merge_by_hand,
    pixel_label_patches,
)
from .mixes import assert_history_close, history_in_classes, random_mix

# Patch 4, window 7 (the defaults).
ARCH2 = dict(embed_dims=16, depths=[2, 2], num_heads=[2, 4])
ARCH3 = dict(embed_dims=16, depths=[2, 2, 2], num_heads=[2, 2, 4])


def build_swin(arch=ARCH2, sharpen=4.0, seed=0, **kwargs):
    torch.manual_seed(seed)
    cfg = dict(type='SwinTransformer', arch=arch, img_size=64,
               out_indices=(len(arch['depths']) - 1, ), drop_path_rate=0.)
    cfg.update(kwargs)
    swin = MODELS.build(cfg)
    with torch.no_grad():
        for stage in swin.stages:
            for block in stage.blocks:
                w_msa = block.attn.w_msa
                w_msa.relative_position_bias_table.normal_(0, 1)
                # Sharpen the attention: scale the query and key projections.
                w_msa.qkv.weight[:2 * w_msa.embed_dims] *= sharpen
    swin.eval()
    return swin


CASES = [
    # 70x70: 18x18 tokens padded to 21x21, then 9x9 padded to 14x14.
    dict(name='70x70 S=2', S=2, size=(70, 70)),
    dict(name='70x70 S=3', S=3, size=(70, 70)),
    # Token rows 3..11, columns 5..14 (edges inside patches, odd token
    # edges cut 2x2 merge groups, none on a window edge).
    dict(name='cutmix box through windows and merges', S=2, size=(70, 70),
         box=(13, 45, 21, 59)),
    # 14x21 tokens, then 7x11: min(H, W) == window turns the shift off in
    # stage 2; W is still padded.
    dict(name='stage map equals window', S=3, size=(56, 84)),
    # 18x18, 9x9, 5x5 (padded to 7x7, shifted).
    dict(name='pad_small_map', S=2, size=(70, 70), arch=ARCH3,
         pad_small_map=True),
    # The head reads stage 0 after its PatchMerging.
    dict(name='out_after_downsample', S=3, size=(62, 70), out_indices=(0, ),
         out_after_downsample=True),
    dict(name='no residual average', S=2, size=(70, 70), residual_norm=False),
]


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_matches_dense_reference(case):
    case = dict(case)
    _, S, (H, W), box = (case.pop('name'), case.pop('S'), case.pop('size'),
                            case.pop('box', None))
    residual_norm = case.pop('residual_norm', True)
    swin = build_swin(**case)
    images, pw, targets = random_mix(2, S, H, W, box=box)
    aligned = aligned_forward(swin, images, pw, residual_norm=residual_norm,
                              keep_history=True)
    ref, ref_history, ref_feat = dense_swin_labels(
        swin, images, pw, targets, patch=4, residual_norm=residual_norm)
    # The reference's own forward is the model's (float64 vs float32).
    assert (aligned.feats[-1].double() - ref_feat).abs().max() < 1e-4
    assert (aligned.expand(targets).double() - ref).abs().max() <= 1e-5
    assert_history_close(aligned.history, ref_history,
                         sum(swin.depths) + 1, targets)
    # The alignment moved labels: the test can fail.
    assert (ref_history[1] - ref_history[0]).abs().max() > 1e-2


def test_padding_rule_is_what_is_tested():
    """On 70x70, real tokens attend to padded ones: another padding rule
    gives other labels, far beyond the tolerance."""
    swin = build_swin()
    images, pw, targets = random_mix(1, 2, 70, 70)
    _, ours, _ = dense_swin_labels(swin, images, pw, targets, patch=4)
    _, other, _ = dense_swin_labels(swin, images, pw, targets, patch=4,
                                    pad_rule='real_keys')
    assert max((a - b).abs().max() for a, b in zip(ours, other)) > 1e-3


@pytest.mark.parametrize('size', [70, 250])
def test_token_grid_of_every_block(size):
    # 250x250: 63x63 tokens (9x9 windows), 32x32 (padded to 35), 16x16.
    # 70x70: 18x18 (padded to 21), 9x9 (padded to 14), 5x5 (to 7).
    swin = build_swin(ARCH3, pad_small_map=True)
    images, pw, targets = random_mix(2, 2, size, size)
    aligned = aligned_forward(swin, images, pw, keep_history=True)
    sides = [63, 32, 16] if size == 250 else [18, 9, 5]
    assert [h.shape[1] for h in aligned.history] == \
        [sides[0]**2] * 3 + [sides[1]**2] * 2 + [sides[2]**2] * 2


class EyeSoftmax(nn.Softmax):
    """Attention that moves nothing: ``A = I`` in every window."""

    def forward(self, x):
        return torch.eye(x.shape[-1]).expand_as(x)


def test_merged_labels_are_the_mean_by_hand():
    """With attention that moves nothing, only merging moves labels: the
    merged labels are the hand-computed means of 2x2 groups."""
    swin = build_swin()
    for stage in swin.stages:
        for block in stage.blocks:
            block.attn.w_msa.softmax = EyeSoftmax(dim=-1)
    images, pw, targets = random_mix(2, 2, 70, 70, box=(13, 45, 21, 59))
    aligned = aligned_forward(swin, images, pw, keep_history=True)
    initial = pixel_label_patches(pw, targets, 4)
    merged, _ = merge_by_hand(initial, (18, 18))
    ours = history_in_classes(aligned.history, targets)
    for labels in ours[:3]:
        torch.testing.assert_close(labels, initial, atol=1e-6, rtol=0)
    for labels in ours[3:]:
        torch.testing.assert_close(labels, merged, atol=1e-6, rtol=0)
    torch.testing.assert_close(aligned.expand(targets).double(),
                               merged.mean(1), atol=1e-6, rtol=0)


def test_tokens_are_the_plain_forward_in_eval_and_training():
    swin = build_swin(
        drop_path_rate=0.5,
        stage_cfgs=dict(block_cfgs=dict(attn_cfgs=dict(attn_drop=0.2))))
    images, pw, _ = random_mix(2, 2, 70, 70)
    assert torch.equal(aligned_forward(swin, images, pw).feats[0],
                       swin(images)[0])
    swin.train()
    torch.manual_seed(5)
    plain = swin(images)[0]
    torch.manual_seed(5)
    aligned = aligned_forward(swin, images, pw)
    assert torch.equal(aligned.feats[0], plain)


def check_drop_path_keeps_labels(swin, side, follow):
    """In training, the second block of stages 1 and 2 (same map before
    and after) moves the labels of exactly the samples its drop-path kept
    (all of them with ``follow=False``); both cases occur."""
    swin.train()
    images, pw, _ = random_mix(6, 2, side, side)
    dropped = []
    for stage in swin.stages:
        for block in stage.blocks:
            block.attn.drop.register_forward_hook(
                lambda m, i, o: dropped.append(o.flatten(1).eq(0).all(1)))
    torch.manual_seed(3)
    aligned = aligned_forward(swin, images, pw, follow_drop_path=follow,
                              keep_history=True)
    seen = set()
    for block in (1, 3):  # second blocks: same map before and after
        before, after = aligned.history[block], aligned.history[block + 1]
        moved = (after - before).flatten(1).abs().amax(1) > 1e-6
        for b in range(6):
            seen.add(bool(dropped[block][b]))
            assert moved[b] == (not (follow and dropped[block][b]))
    assert seen == {True, False}


@pytest.mark.parametrize('follow', [True, False])
def test_drop_path_keeps_labels_of_dropped_samples(follow):
    # Drop-path rates 0, 0.3, 0.6, 0.9 over the four blocks.
    check_drop_path_keeps_labels(build_swin(drop_path_rate=0.9), 56, follow)


def test_labels_use_attention_before_dropout():
    kwargs = dict(
        stage_cfgs=dict(block_cfgs=dict(attn_cfgs=dict(attn_drop=0.5))))
    images, pw, _ = random_mix(2, 2, 70, 70)
    swin = build_swin(**kwargs)
    evaluated = aligned_forward(swin, images, pw, keep_history=True).history
    swin.train()
    trained = aligned_forward(swin, images, pw, keep_history=True).history
    # The first block computes the same softmax, op for op (bit-identical
    # labels); its dropout changes the tokens (so later blocks differ), not
    # the labels.
    assert torch.equal(trained[1], evaluated[1])
    assert (trained[2] - evaluated[2]).abs().max() > 1e-4


def test_swin_tiny_geometry_224():
    """Swin-T's stages at 224x224 (a narrow width keeps it fast); the last
    stage's 7x7 map equals the window."""
    swin = build_swin(
        dict(embed_dims=24, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24]),
        out_indices=(3, ))
    assert 'windows' in {t.kind for t in describe(swin).taps}
    # 56, 28, 14, 7 tokens a side.
    check_tiny_geometry(swin, 224, [3136, 3136, 784, 196, 196, 196, 49])


def check_tiny_geometry(swin, side, tokens):
    """A Swin-T-deep model (12 blocks) at ``side``: the token counts
    before block 0, 2, 4, ... and after the last, the plain features, and
    distributions throughout."""
    assert len(describe(swin).blocks) == 12
    images, pw, _ = random_mix(1, 2, side, side, box=(30, 150, 50, 200))
    aligned = aligned_forward(swin, images, pw, keep_history=True)
    assert [h.shape[1] for h in aligned.history[::2]] == tokens
    assert torch.equal(aligned.feats[0], swin(images)[0])
    for labels in aligned.history:
        assert (labels >= 0).all()
        torch.testing.assert_close(labels.sum(-1),
                                   torch.ones(labels.shape[:2]), atol=1e-6,
                                   rtol=0)


def test_bf16_autocast_keeps_labels_fp32():
    swin = build_swin()
    images, pw, targets = random_mix(2, 2, 70, 70)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        aligned = aligned_forward(swin, images, pw, keep_history=True)
    for labels in aligned.history:
        assert labels.dtype == torch.float32
        torch.testing.assert_close(labels.sum(-1),
                                   torch.ones(labels.shape[:2]), atol=1e-6,
                                   rtol=0)
    fp32 = aligned_forward(swin, images, pw)
    # The attention itself comes from bf16 q, k.
    assert (aligned.weights - fp32.weights).abs().max() < 3e-2


def test_no_output_stage_is_a_clear_error():
    swin = build_swin(out_indices=())
    images, pw, targets = random_mix(1, 2, 70, 70)
    with pytest.raises(ValueError, match='out_indices'):
        align_labels(swin, images, pw, targets)
