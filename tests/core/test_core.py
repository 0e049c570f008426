"""The pure-torch core: window means, head-mean attention and its paths,
and ``align`` on hand-built slots (two blocks, one with a dropped sample
and a convolution branch after its attention, a merge, and a block that
recorded its probabilities) against the rule by hand in float64. (The
residual rule with padded keys, and with its options: the dense
references of tests/models/test_alignment.py and test_every_backbone.py.)
"""
from itertools import product

import pytest
import torch
import torch.nn.functional as F

from tlalign_mm.core import (
    AlignOptions,
    Recorded,
    Slot,
    TokenStep,
    align,
    flatten_label_map,
    head_mean_attention,
    window_mean,
)


def test_window_mean_is_the_mean_over_real_positions_or_a_clear_error():
    """Against a loop over the windows, on either axis (the other one
    untouched), for every geometry of a small grid (sum pooling where the
    padding is at most half the kernel and no dilation, else the
    convolution): the mean over the real positions a window reads (explicit
    pre-padding and the conv's padding carry no label); a window of only
    padding is the error. That check runs on Python ints (no GPU wait), so
    it must agree with the counts here."""
    checked = empty = 0
    for size, k, s, p, d, lo, hi in product((1, 7), (1, 2, 3), (1, 2, 4),
                                            (0, 1, 2, 3), (1, 2), (0, 5),
                                            (0, 3)):
        span = d * (k - 1) + 1
        if lo + size + hi + 2 * p < span:
            continue
        x = torch.rand(2, 3, size, 4, generator=torch.Generator(
            ).manual_seed(checked))
        padded = F.pad(x, (0, 0, lo + p, hi + p))
        valid = F.pad(torch.ones(size, 1), (0, 0, lo + p, hi + p))
        windows = [slice(s * i, s * i + span, d)
                   for i in range((padded.shape[2] - span) // s + 1)]
        counts = [valid[w].sum() for w in windows]
        for axis, geometry in ((2, ((k, 1), (s, 1), (p, 0), (d, 1),
                                    (0, 0, lo, hi))),
                               (3, ((1, k), (1, s), (0, p), (1, d),
                                    (lo, hi, 0, 0)))):
            image = x if axis == 2 else x.transpose(2, 3)
            if min(counts) == 0:
                with pytest.raises(ValueError, match='covers only padding'):
                    window_mean(image, *geometry)
                continue
            ref = torch.stack([padded[:, :, w].sum(2) / c
                               for w, c in zip(windows, counts)], 2)
            torch.testing.assert_close(window_mean(image, *geometry),
                                       ref if axis == 2 else ref.transpose(
                                           2, 3))
        checked += 1
        empty += min(counts) == 0
    assert checked > 200 and 20 < empty < checked - 20


def head_mean(q, k, mask=None, scale=None):
    """The heads' mean attention, explicitly, in float64."""
    scale = q.shape[-1]**-0.5 if scale is None else scale.double().view(
        1, -1, 1, 1)
    logits = q.double() @ k.double().transpose(-2, -1) * scale
    return (logits + (0 if mask is None else mask)).softmax(-1).mean(1)


@pytest.mark.parametrize('impl', ['explicit', 'sdpa'])
@pytest.mark.parametrize('mask', [
    None, torch.zeros(7, 7).fill_diagonal_(float('-inf')),
    torch.randn(7, 7, generator=torch.Generator().manual_seed(1))],
    ids=['no-mask', 'diagonal', 'float'])
@pytest.mark.parametrize('per_head_scale', [False, True])
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_head_mean_attention_equals_explicit_attention(impl, mask,
                                                       per_head_scale, dtype):
    """From float32 or bf16 q and k, float32 labels: those of the float64
    attention of those q, k. The SDPA path is a call the fused (flash)
    kernel takes: with only flash allowed, it does not raise."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    torch.manual_seed(0)
    B, H, N, d, S = 2, 3, 7, 16, 3
    q, k = ((torch.randn(B, H, N, d) * 2).to(dtype) for _ in range(2))
    Y = torch.rand(B, N, S)
    scale = torch.rand(H) + 0.1 if per_head_scale else None
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        AY, mass = head_mean_attention(q, k, Y, mask, scale, impl=impl)
    assert mass is None and AY.dtype == torch.float32
    torch.testing.assert_close(AY.double(), head_mean(q, k, mask, scale) @
                               Y.double(), atol=1e-6, rtol=1e-5)
    _, mass = head_mean_attention(q, k, Y, mask, scale, impl=impl,
                                  with_mass=True)
    torch.testing.assert_close(mass, AY.sum(-1, keepdim=True))


def test_an_unknown_or_impossible_path_is_a_clear_error():
    q = torch.randn(1, 1, 2, 4)
    Y = torch.rand(1, 2, 1)
    with pytest.raises(ValueError, match='impl must be one of'):
        head_mean_attention(q, q, Y, impl='fused')
    with pytest.raises(ValueError, match='triton'):
        head_mean_attention(q, q, Y, bias=torch.zeros(2, 2), impl='triton')


def test_align_on_hand_built_records_equals_the_hand_computation():
    torch.manual_seed(0)
    B, H, N, d, S = 2, 2, 8, 4, 3
    Y = torch.rand(B, N, S)
    Y = Y / Y.sum(-1, keepdim=True)
    q1, k1, q2, k2 = (torch.randn(B, H, N, d) * 2 for _ in range(4))
    probs = torch.softmax(torch.randn(B, H, 2, 2) * 3, -1)
    keep = torch.tensor([True, False]).view(B, 1, 1)  # sample 1 dropped
    conv = TokenStep((2, 4), lambda label_map: flatten_label_map(
        window_mean(label_map, 3, 1, 1)), 'conv', residual=True,
        keep=keep.flip(0))  # sample 0 dropped
    slots = [Slot(q=q1, k=k1),
             Slot(q=q2, k=k2, keep=keep, steps=[conv], attention_at=0),
             Slot(steps=[TokenStep((2, 4), lambda label_map: flatten_label_map(
                 F.avg_pool2d(label_map, 2)), 'merge')], probs=probs),  # 2x2
             Slot()]
    # the initial labels: the embedding's rule of the pixel weights
    records = Recorded(slots, embed=lambda pixel_weights: Y)
    pw = torch.ones(B, S, 1, 1) / S
    labels, history = align(records, pw, keep_history=True)

    y = Y.double()
    expected = [y]
    y = (y + head_mean(q1, k1) @ y) / 2  # block 0: the paper's rule
    expected.append(y)
    moved = (y + head_mean(q2, k2) @ y) / 2  # block 1: sample 1 dropped
    y = torch.stack([moved[0], y[1]])
    # then its conv branch: each position's 3x3 window mean on the 2x4 map
    # (real positions only), sample 0 dropped
    W = torch.zeros(8, 8, dtype=torch.double)
    for r, c, dr, dc in product(range(2), range(4), (-1, 0, 1), (-1, 0, 1)):
        if 0 <= r + dr < 2 and 0 <= c + dc < 4:
            W[r * 4 + c, (r + dr) * 4 + c + dc] = 1
    W = W / W.sum(1, keepdim=True)
    y = torch.stack([y[0], (y[1] + W @ y[1]) / 2])
    expected.append(y)
    y = y.view(B, 2, 4, S).permute(0, 3, 1, 2)  # the merge: 2x2 means
    y = y.reshape(B, S, 1, 2, 2, 2).mean((3, 5)).flatten(2).transpose(1, 2)
    y = (y + probs.double().mean(1) @ y) / 2  # block 2: given probs
    expected.append(y)

    assert len(history) == len(expected)
    for ours, theirs in zip(history, expected):
        assert (ours.double() - theirs).abs().max() < 1e-6
    # align returns what the head reads: the records' readout (default:
    # the mean of the tokens), here also the first token
    assert (labels.double() - y.mean(1)).abs().max() < 1e-6
    first, _ = align(records._replace(readout=(0, 1)), pw)
    assert (first.double() - y[:, 0]).abs().max() < 1e-6
    # each sample moved in block 1 by the branch it kept, far beyond 1e-6
    assert (history[2] - history[1]).abs().amax((1, 2)).min() > 1e-3
    # a branch that did not run is an error as a missing attention is
    slots[1].expects = ('attention', 'step', 'step')
    with pytest.raises(RuntimeError, match='Block 1 recorded no step'):
        align(records, pw)

    # a slot missing a part its taps record is the one error
    slots[1].expects = ('attention', 'key_map')
    with pytest.raises(RuntimeError, match='Block 1 recorded no key_map'):
        align(records, pw)


def window_matrix(hw, kernel, stride, padding):
    """``(h*w, H*W)``: row ``o`` the mean over the real positions of output
    ``o``'s window, by a loop (a 1x1 window of stride ``s``: a selection)."""
    (H, W), k, s, p = hw, kernel, stride, padding
    h, w = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    P = torch.zeros(h * w, H * W, dtype=torch.double)
    for i, j, a, b in product(range(h), range(w), range(k), range(k)):
        r, c = i * s - p + a, j * s - p + b
        if 0 <= r < H and 0 <= c < W:
            P[i * w + j, r * W + c] = 1
    return P / P.sum(1, keepdim=True)


def test_pooled_and_subset_queries_equal_the_hand_computation():
    """Four blocks of docs/design.md's "Pooled and subset queries" on a 4x4
    map, against the rule written out with explicit window matrices in
    float64: MViTv2's downscaling block (max-pool skip, keys pooled by 2,
    residual pooling; sample 1 dropped), its block that keeps the map (3x3
    pooled queries added to the attention's output), LeViT's subsampling
    attention (no residual: ``Ā Y``), and class attention, the class token
    joining before it at the area share (only it moves)."""
    from tlalign_mm.core import Pool, PooledQueries, QuerySubset
    torch.manual_seed(0)
    B, H, d, S = 2, 2, 4, 3
    Y = torch.rand(B, 16, S).pow(3)
    Y = Y / Y.sum(-1, keepdim=True)
    area = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    q0, k0 = torch.randn(B, H, 4, d) * 2, torch.randn(B, H, 4, d) * 2
    q1, k1 = torch.randn(B, H, 4, d) * 2, torch.randn(B, H, 4, d) * 2
    q2, k2 = torch.randn(B, H, 1, d) * 2, torch.randn(B, H, 4, d) * 2
    probs = torch.softmax(torch.randn(B, H, 1, 2) * 3, -1)
    keep = torch.tensor([True, False]).view(B, 1, 1)
    down = Pool((3, 3), (2, 2), (1, 1))
    slots = [
        Slot(q=q0, k=k0, keep=keep, attention_at=0, key_map=PooledQueries(
            (4, 4), down, True, keys=down, query=down)),
        Slot(q=q1, k=k1, attention_at=0, key_map=PooledQueries(
            (2, 2), None, True, query=Pool((3, 3), (1, 1), (1, 1)))),
        Slot(q=q2, k=k2, attention_at=0, key_map=PooledQueries(
            (2, 2), Pool((1, 1), (2, 2)), False)),
        Slot(probs=probs, attention_at=0, key_map=QuerySubset(1)),
        Slot()]
    records = Recorded(slots, embed=lambda pixel_weights: Y, extra_tokens=1,
                       readout=(0, 1), extra_from=3)
    pw = torch.ones(B, S, 1, 1) / S

    P4, P2 = window_matrix((4, 4), 3, 2, 1), window_matrix((2, 2), 3, 1, 1)
    y = Y.double()
    expected = [y]
    own = P4 @ y  # block 0: the skip's windows; keys and queries alike
    moved = (own + (P4 @ y + head_mean(q0, k0) @ (P4 @ y)) / 2) / 2
    y = torch.stack([moved[0], own[1]])  # sample 1 dropped: the skip's
    expected.append(y)
    y = (y + (P2 @ y + head_mean(q1, k1) @ y) / 2) / 2  # block 1
    expected.append(y)
    y = head_mean(q2, k2) @ y  # block 2: no residual
    expected.append(y)
    y = torch.cat([area[:, None].double(), y], 1)  # the class token joins
    c = (y[:, :1] + probs.double().mean(1) @ y) / 2  # block 3: it moves
    expected.append(torch.cat([c, y[:, 1:]], 1))

    labels, history = align(records, pw, area, keep_history=True)
    assert [h.shape[1] for h in history] == [16, 4, 4, 1, 2]
    for ours, theirs in zip(history, expected):
        assert (ours.double() - theirs).abs().max() < 1e-6
    assert (labels.double() - c[:, 0]).abs().max() < 1e-6
    # every block moved the labels of the tokens it made, far beyond 1e-6
    assert (expected[1] - P4 @ Y.double()).abs().max() > 1e-2
    assert (expected[2] - expected[1]).abs().max() > 1e-2
    assert (expected[3] - P2[:1] @ expected[2]).abs().max() > 1e-2

    # A block that does not align makes its tokens' own labels (the skip's
    # windows, the selection); without the residual average, M Y.
    first, history = align(records, pw, area, AlignOptions(
        align_layers=[1, 2, 3]), keep_history=True)
    assert (history[1].double() - P4 @ Y.double()).abs().max() < 1e-6
    _, history = align(records, pw, area, AlignOptions(
        align_layers=[0, 1], residual_norm=False), keep_history=True)
    y = Y.double()
    M = (P4 @ y + head_mean(q0, k0) @ (P4 @ y)) / 2
    y = torch.stack([M[0], (P4 @ y)[1]])
    assert (history[1].double() - y).abs().max() < 1e-6
    y = (P2 @ y + head_mean(q1, k1) @ y) / 2
    assert (history[2].double() - y).abs().max() < 1e-6
    assert (history[3].double() - y[:, :1]).abs().max() < 1e-6  # selected


def test_extra_tokens_that_join_later_start_at_the_area_share():
    """``extra_from=2`` (T2T-ViT's class token): blocks 0 and 1 move the
    patch tokens alone (with a 2x2 merge before block 1, at a float scale),
    the class token joins before block 2 at ``area_share`` and moves with
    them from there; the head reads it."""
    torch.manual_seed(0)
    B, H, d, S = 2, 2, 4, 3
    Y = torch.rand(B, 8, S)
    Y = Y / Y.sum(-1, keepdim=True)
    area = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    q0, k0 = (torch.randn(B, H, 8, d) * 2 for _ in range(2))
    q1, k1 = (torch.randn(B, H, 2, d) * 2 for _ in range(2))
    q2, k2 = (torch.randn(B, H, 3, d) * 2 for _ in range(2))
    merge = TokenStep((2, 4), lambda label_map: flatten_label_map(
        F.avg_pool2d(label_map, 2)), 'merge')
    slots = [Slot(q=q0, k=k0),
             Slot(q=q1, k=k1, scale=8., steps=[merge], attention_at=1),
             Slot(q=q2, k=k2), Slot()]
    records = Recorded(slots, lambda pixel_weights: Y, extra_tokens=1,
                       readout=(0, 1), extra_from=2)
    labels, history = align(records, torch.ones(B, S, 1, 1) / S, area,
                            keep_history=True)

    y = Y.double()
    y = (y + head_mean(q0, k0) @ y) / 2
    y = y.view(B, 2, 4, S).permute(0, 3, 1, 2)  # the merge: 2x2 means
    y = y.reshape(B, S, 1, 2, 2, 2).mean((3, 5)).flatten(2).transpose(1, 2)
    y = (y + head_mean(q1, k1, scale=torch.tensor([8., 8.])) @ y) / 2
    after_1 = y
    y = torch.cat([area.double()[:, None], y], 1)  # the class token joins
    y = (y + head_mean(q2, k2) @ y) / 2
    assert [tuple(h.shape) for h in history] == [(B, 8, S), (B, 8, S),
                                                 (B, 2, S), (B, 3, S)]
    assert (history[2].double() - after_1).abs().max() < 1e-6
    assert (history[3].double() - y).abs().max() < 1e-6
    assert (labels.double() - y[:, 0]).abs().max() < 1e-6
    # it moved, far beyond 1e-6, from where it joined
    assert (y[:, 0] - area).abs().max() > 1e-2
