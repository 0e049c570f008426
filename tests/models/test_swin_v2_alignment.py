"""TL-Align through mmpretrain's SwinTransformerV2 against a dense
reference (:mod:`.dense_reference_swin_v2`)."""
import copy
import math

import pytest
import torch
from mmpretrain.registry import MODELS

from tlalign_mm.models import aligned_forward, describe

from .dense_reference_swin_v2 import dense_swin_v2_labels
from .mixes import (
    assert_history_close,
    in_classes,
    random_mix,
)
from .test_swin_alignment import (
    check_drop_path_keeps_labels,
    check_tiny_geometry,
)

# Patch 4, window 4 unless a case says otherwise.
ARCH2 = dict(embed_dims=16, depths=[2, 2], num_heads=[2, 4],
             extra_norm_every_n_blocks=0)
ARCH3 = dict(embed_dims=16, depths=[2, 2, 2], num_heads=[2, 2, 4],
             extra_norm_every_n_blocks=0)


def build_swin_v2(arch=ARCH2, seed=0, window_size=4, **kwargs):
    """A tiny Swin V2 whose attention is far from uniform: random q/v
    biases, a CPB MLP with large weights, per-head logit scales from 2 to
    300 (those above 100 are clamped by the model)."""
    torch.manual_seed(seed)
    cfg = dict(type='SwinTransformerV2', arch=arch, img_size=64,
               window_size=window_size, drop_path_rate=0.,
               out_indices=(len(arch['depths']) - 1, ),
               pretrained_window_sizes=[0] * len(arch['depths']))
    cfg.update(kwargs)
    swin = MODELS.build(cfg)
    with torch.no_grad():
        for stage in swin.stages:
            for block in stage.blocks:
                w_msa = block.attn.w_msa
                w_msa.q_bias.normal_(0, 0.5)
                w_msa.v_bias.normal_(0, 0.5)
                w_msa.cpb_mlp[2].weight.normal_(0, 0.3)
                heads = w_msa.num_heads
                w_msa.logit_scale.copy_(torch.linspace(
                    math.log(2), math.log(300), heads).view(heads, 1, 1))
    swin.eval()
    return swin


CASES = [
    # 16x16 tokens, then 8x8: no padding, the second block of each stage
    # shifted.
    dict(name='shift on and off, a merge', S=2, size=(64, 64)),
    # 18x18 tokens padded to 20x20, then 9x9 padded to 12x12.
    dict(name='padded', S=3, size=(70, 70)),
    dict(name='cutmix box through windows and merges', S=2, size=(70, 70),
         box=(13, 45, 21, 59)),
    # 8x12 tokens, then 4x6: min(H, W) == window turns the shift off in
    # stage 2; W is still padded.
    dict(name='stage map equals window', S=3, size=(32, 48)),
    # Window 8: 18x18 (padded to 24), 9x9 (to 16), 5x5 (to 8, shifted).
    dict(name='pad_small_map', S=2, size=(70, 70), arch=ARCH3,
         window_size=8, pad_small_map=True),
    dict(name='pretrained_window_size', S=2, size=(70, 70),
         pretrained_window_sizes=[6, 3]),
    dict(name='window per stage', S=2, size=(70, 70), window_size=[3, 4],
         pretrained_window_sizes=[4, 0]),
    # The head reads stage 0 (16x19 tokens), before stage 1's merge (of
    # partial groups); stage 1 still runs.
    dict(name='out_indices=(0,)', S=3, size=(62, 74), out_indices=(0, )),
    dict(name='out_indices=(0, 1)', S=2, size=(62, 70), out_indices=(0, 1)),
    dict(name='extra norm every block', S=2, size=(70, 70),
         arch=dict(ARCH2, extra_norm_every_n_blocks=1)),
    dict(name='no residual average', S=2, size=(70, 70), residual_norm=False),
]


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_matches_dense_reference(case):
    case = dict(case)
    _, S, (H, W), box = (case.pop('name'), case.pop('S'), case.pop('size'),
                            case.pop('box', None))
    residual_norm = case.pop('residual_norm', True)
    swin = build_swin_v2(**case)
    assert 'windows' in {t.kind for t in describe(swin).taps}
    images, pw, targets = random_mix(2, S, H, W, box=box)
    aligned = aligned_forward(swin, images, pw, residual_norm=residual_norm,
                              keep_history=True)
    ref, ref_history, ref_feat = dense_swin_v2_labels(
        swin, images, pw, targets, patch=4,
        pretrained_window_sizes=case.get('pretrained_window_sizes',
                                         [0] * len(swin.stages)),
        residual_norm=residual_norm)
    # The reference's own forward is the model's, both in float64 (the
    # model's CPB coordinates are a float32 buffer): its attention is the
    # model's attention.
    plain64 = copy.deepcopy(swin).double()(images.double())[-1]
    assert (plain64 - ref_feat).abs().max() < 1e-5
    assert (aligned.expand(targets).double() - ref).abs().max() <= 1e-5
    assert_history_close(aligned.history, ref_history,
                         sum(swin.depths) + 1, targets)
    # The alignment moved the labels (in the first block, and the target
    # away from CutMix's area target: source shares by 100 times the
    # tolerance, the class label beyond it).
    assert (ref_history[1] - ref_history[0]).abs().max() > 1e-2
    area = pw.mean((2, 3))
    assert (aligned.weights - area).abs().max() > 1e-3
    assert (ref - in_classes(area, targets)).abs().max() > 1e-4


def test_unregistered_downsample_is_a_clear_error(monkeypatch):
    from tlalign_mm.models.token_rules import TOKEN_RULES
    swin = MODELS.build(dict(type='SwinTransformerV2', arch=ARCH2,
                             window_size=4, out_indices=(1, )))
    monkeypatch.delitem(TOKEN_RULES,
                        'mmpretrain.models.utils.embed.PatchMerging')
    with pytest.raises(NotImplementedError, match='PatchMerging'):
        describe(swin)


def test_swin_v2_tiny_geometry_256():
    """SwinV2-T's stages at 256x256, window 8 (a narrow width keeps it
    fast): 64, 32, 16, 8 tokens a side; the last map equals the window."""
    swin = build_swin_v2(
        dict(embed_dims=24, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
             extra_norm_every_n_blocks=0), window_size=8, img_size=256,
        out_indices=(3, ))
    check_tiny_geometry(swin, 256, [4096, 4096, 1024, 256, 256, 256, 64])


@pytest.mark.parametrize('follow', [True, False])
def test_drop_path_keeps_labels_of_dropped_samples(follow):
    """Post-norm: a dropped branch is ``norm1(0)``, a constant; the drop is
    read off the drop-path's own output before the norm."""
    check_drop_path_keeps_labels(build_swin_v2(drop_path_rate=0.9), 64,
                                 follow)
