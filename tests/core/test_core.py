"""The pure-torch core: window means, the residual rule, the fused trick."""
import contextlib

import pytest
import torch
import torch.nn.functional as F

from tlalign_mm.core import (
    AlignmentState,
    attention_with_labels,
    residual_align,
    window_mean,
)

# (kernel, stride, padding, dilation): the first two take the sum-pooling
# path, the others (padding over half the kernel, dilation) the convolution.
GEOMETRIES = [(3, 2, 1, 1), (4, 4, 0, 1), (3, 2, 2, 1), (3, 1, 1, 2)]


@pytest.mark.parametrize('k,s,p,d', GEOMETRIES)
def test_window_mean_matches_a_loop_and_ignores_padding(k, s, p, d):
    torch.manual_seed(0)
    x = torch.rand(2, 3, 9, 11)
    out = window_mean(x, kernel_size=k, stride=s, padding=p, dilation=d,
                      pre_pad=(0, 1, 0, 1))
    # brute force: pad, and keep a map of the real positions
    padded = F.pad(x, (0, 1, 0, 1))
    valid = F.pad(torch.ones(1, 1, 9, 11), (0, 1, 0, 1))
    padded, valid = F.pad(padded, (p, ) * 4), F.pad(valid, (p, ) * 4)
    span = d * (k - 1) + 1
    h = (padded.shape[2] - span) // s + 1
    w = (padded.shape[3] - span) // s + 1
    ref = torch.zeros(2, 3, h, w)
    for i in range(h):
        for j in range(w):
            rows = slice(s * i, s * i + span, d)
            cols = slice(s * j, s * j + span, d)
            ref[:, :, i, j] = (padded[:, :, rows, cols].sum((2, 3)) /
                               valid[:, :, rows, cols].sum())
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref)


def test_window_mean_rejects_windows_of_only_padding():
    with pytest.raises(ValueError, match='only padding'):
        window_mean(torch.rand(1, 2, 4, 4), 2, 2, pre_pad=(0, 4, 0, 0))


def test_the_padding_check_reads_the_geometry_exactly():
    """The check runs on Python ints (no GPU wait); it must agree with the
    counts a convolution of the valid map gives, over many geometries."""
    from itertools import product

    from tlalign_mm.core.token_labels import _a_window_reads_only_padding
    checked = empty = 0
    for size, k, s, p, d, lo, hi in product((1, 3, 7), (1, 2, 3), (1, 2, 4),
                                            (0, 1, 3), (1, 2), (0, 2, 5),
                                            (0, 3)):
        length = lo + size + hi + 2 * p
        if length < d * (k - 1) + 1:
            continue
        valid = torch.nn.functional.pad(torch.ones(1, 1, 1, size),
                                        (lo, hi))
        count = torch.nn.functional.conv2d(valid, torch.ones(1, 1, 1, k),
                                           stride=(1, s), padding=(0, p),
                                           dilation=(1, d))
        expected = bool((count <= 0).any())
        assert _a_window_reads_only_padding(size, k, s, p, d, lo, hi) == \
            expected, (size, k, s, p, d, lo, hi)
        checked += 1
        empty += expected
    assert checked > 500 and 50 < empty < checked - 50


def test_residual_align_rule_and_keep_mask():
    Y = torch.rand(3, 4, 2)
    AY = torch.rand(3, 4, 2)
    torch.testing.assert_close(residual_align(Y, AY), (Y + AY) / 2)
    torch.testing.assert_close(residual_align(Y, AY, residual_norm=False), AY)
    keep = torch.tensor([True, False, True])
    out = residual_align(Y, AY, keep=keep)
    torch.testing.assert_close(out[1], Y[1])
    torch.testing.assert_close(out[0], (Y[0] + AY[0]) / 2)


def test_padding_renormalises_the_paper_rule():
    """With padded keys (mass m < 1) the update is (Y + ĀY) / (1 + m), and
    ĀY / m without the residual average; m = 1 is the paper's rule."""
    Y = torch.softmax(torch.randn(2, 5, 3), -1)
    A = torch.softmax(torch.randn(2, 5, 7), -1)  # 7 keys, the last 2 padded
    keys = torch.cat([Y, torch.zeros(2, 2, 3)], 1)
    AY, m = A @ keys, A[..., :5].sum(-1, keepdim=True)
    ours = residual_align(Y, AY, mass=m)
    torch.testing.assert_close(ours, (Y + AY) / (1 + m))
    torch.testing.assert_close(ours.sum(-1), torch.ones(2, 5))
    torch.testing.assert_close(
        residual_align(Y, AY, residual_norm=False, mass=m), AY / m)
    torch.testing.assert_close(residual_align(Y, AY, mass=torch.ones_like(m)),
                               residual_align(Y, AY))
    keep = torch.tensor([False, True])
    torch.testing.assert_close(residual_align(Y, AY, keep=keep, mass=m)[0],
                               Y[0])


def test_state_resolves_layers():
    Y = torch.rand(1, 2, 2)
    assert AlignmentState(Y, 'last', num_layers=4)._aligned == {3}
    assert AlignmentState(Y, [0, -1], num_layers=4)._aligned == {0, 3}
    state = AlignmentState(Y, [1], num_layers=3, keep_history=True)
    for _ in range(3):
        state.step(torch.zeros_like(Y))
    assert torch.equal(state.history[1], Y.float())  # block 0 left it alone
    assert torch.equal(state.history[2], Y.float() / 2)
    assert len(state.history) == 4


def explicit(q, k, v, mask=None, scale=None):
    scale = scale or q.shape[-1]**-0.5
    logits = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        logits = logits.masked_fill(~mask, float('-inf')) \
            if mask.dtype == torch.bool else logits + mask
    A = logits.softmax(-1)
    return A @ v, A


def force_path(monkeypatch, path):
    """Make attention_with_labels take one path for plain SDPA calls:
    'explicit' (head-mean attention recomputed without gradient) or
    'ride_along' (labels as extra value channels of the block's call)."""
    from tlalign_mm.core import fused_attention
    monkeypatch.setattr(fused_attention, 'EXPLICIT_MAX_HEAD_DIM',
                        10**9 if path == 'explicit' else 0)


def test_the_path_follows_the_head_width():
    """Narrow heads take the explicit path (padding q, k would cost more),
    wide heads ride along; each path's operations show which ran."""
    from tlalign_mm.cost import OpCounter
    Y = torch.rand(2, 9, 3)
    for d, expected in ((16, 'aten._softmax'), (64, 'aten.cat')):
        q, k, v = (torch.randn(2, 3, 9, d) for _ in range(3))
        with OpCounter() as ops:
            attention_with_labels(F.scaled_dot_product_attention, q, k, v, Y)
        names = ' '.join(ops.ops)
        assert expected in names
        assert ('aten.cat' in names) == (d == 64)


@pytest.mark.parametrize('path', ['explicit', 'ride_along'])
@pytest.mark.parametrize('mask_kind', [None, 'bool', 'float'])
@pytest.mark.parametrize('fn', ['fused', 'python'])
def test_fused_trick_equals_explicit_attention(mask_kind, fn, path,
                                               monkeypatch):
    force_path(monkeypatch, path)
    torch.manual_seed(0)
    B, H, N, d, S = 2, 3, 7, 16, 3
    q, k, v = (torch.randn(B, H, N, d) * 2 for _ in range(3))
    Y = torch.rand(B, N, S)
    mask = None
    if mask_kind == 'bool':
        mask = ~torch.eye(N, dtype=torch.bool)
    elif mask_kind == 'float':
        mask = torch.randn(N, N)
    attn_fn = F.scaled_dot_product_attention if fn == 'fused' else \
        (lambda q, k, v, attn_mask=None, dropout_p=0., **kw: explicit(
            q, k, v, attn_mask)[0])
    out, AY = attention_with_labels(attn_fn, q, k, v, Y, attn_mask=mask)
    ref_out, A = explicit(q, k, v, mask)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(AY, A.mean(1) @ Y, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('path', ['explicit', 'ride_along'])
def test_fused_trick_with_dropout_uses_pre_dropout_attention(path,
                                                             monkeypatch):
    force_path(monkeypatch, path)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 8) for _ in range(3))
    Y = torch.rand(2, 5, 2)
    _, AY = attention_with_labels(F.scaled_dot_product_attention, q, k, v, Y,
                                  dropout_p=0.5)
    _, A = explicit(q, k, v)
    torch.testing.assert_close(AY, A.mean(1) @ Y, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('case', ['fp32', 'bf16', 'dropout'])
def test_fused_trick_stays_on_the_fused_kernel(case, monkeypatch):
    """Every call the alignment makes is one the fused (flash) kernel takes:
    with the explicit-attention fallback switched off, none of them raises.
    bf16 and dropout take the second, float32 labels-only call."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    force_path(monkeypatch, 'ride_along')
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 9, 16) for _ in range(3))
    Y = torch.rand(2, 9, 3)
    Y = Y / Y.sum(-1, keepdim=True)
    dtype = torch.bfloat16 if case == 'bf16' else torch.float32

    def labels_call_fused_only(*args, dropout_p=0., **kwargs):
        # CPU flash has no dropout: leave the block's own (dropout) call
        # unrestricted and restrict the alignment's labels-only call.
        if dropout_p > 0:
            return F.scaled_dot_product_attention(
                *args, dropout_p=dropout_p, **kwargs)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(*args, **kwargs)

    if case == 'dropout':
        attn_fn, fused_only = labels_call_fused_only, contextlib.nullcontext()
    else:
        attn_fn = F.scaled_dot_product_attention
        fused_only = sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    with fused_only:
        _, AY = attention_with_labels(
            attn_fn, q.to(dtype), k.to(dtype), v.to(dtype), Y,
            dropout_p=0.5 if case == 'dropout' else 0.)
    _, A = explicit(q.to(dtype).float(), k.to(dtype).float(), v)
    assert AY.dtype == torch.float32
    torch.testing.assert_close(AY, A.mean(1) @ Y, atol=1e-6, rtol=1e-5)
