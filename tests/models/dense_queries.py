"""The dense reference (:mod:`.dense`) for the families whose queries are
not the tokens they pass on: MViTv2 (pooled queries), LeViT (a strided
selection of queries, attention biases) and XCiT (class attention, a
convolution branch): each family's attention by hand in float64 from its
module's weights and the input its call received (checked against the
module's output in eval), and a ``layout`` that walks its blocks with the
rule of docs/design.md ("Pooled and subset queries"), window means as
loops (:func:`.dense.window_means`). Shares no code with ``tlalign_mm``.
"""
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmpretrain.models.backbones.levit import Attention as LeViTAttention
from mmpretrain.models.backbones.levit import AttentionSubsample
from mmpretrain.models.backbones.mvit import MultiScaleAttention
from mmpretrain.models.backbones.xcit import XCA, ClassAttntion

from .dense import (
    Facts,
    _attend,
    _heads,
    _qkv,
    conv_means,
    lin,
    norm,
    window_means,
)


def _grid(Y, hw):
    return Y.reshape(Y.shape[0], *hw, Y.shape[-1])


def conv_stack_means(grid, module):
    """Each ``Conv2d``'s window means in module order (a stem, LPI):
    ``(B, H, W, C)`` -> ``(B, h*w, C)`` and ``(h, w)``."""
    hw = grid.shape[1:3]
    for conv in [m for m in module.modules() if isinstance(m, nn.Conv2d)]:
        Y, hw = conv_means(grid, conv)
        grid = _grid(Y, hw)
    return grid.flatten(1, 2), hw


# ------------------------------------------------------------ MViTv2
def rel_pos_rows(table, q_size, k_size):
    """``(q_size, k_size, d)``: along one axis, the table row of each
    (query, key) pair: offsets on coordinates scaled to the finer grid
    (MViTv2's decomposed relative positions), the table linearly resized to
    ``2 max(q, k) - 1`` rows where it has another length."""
    length = 2 * max(q_size, k_size) - 1
    table = table.double()
    if table.shape[0] != length:
        table = F.interpolate(table.T[None], size=length,
                              mode='linear')[0].T
    rq, rk = max(k_size / q_size, 1.), max(q_size / k_size, 1.)
    rows = [[int(a * rq - c * rk + (k_size - 1) * rk) for c in range(k_size)]
            for a in range(q_size)]
    return table[torch.tensor(rows)]


def mvit_attention(module, args, kwargs):
    """MViTv2's pooling attention of a call: (A ``(B, H, Nq, Nk)``, the
    module's output by hand, the pooled q's and k's maps)."""
    m, x = module, args[0].double()
    hw = tuple(args[1] if len(args) > 1 else kwargs['in_size'])
    B, H = x.shape[0], m.num_heads

    def pool(t, conv, ln):  # (B, H, N, d) on hw -> (B, H, N', d), its map
        d = t.shape[-1]
        t = t.reshape(B * H, *hw, d).permute(0, 3, 1, 2)
        t = F.conv2d(t, conv.weight.double(), None, conv.stride,
                     conv.padding, groups=conv.groups)
        out_hw = tuple(t.shape[-2:])
        return norm(ln, t.reshape(B, H, d, -1).transpose(2, 3)), out_hw

    q, k, v = _qkv(m, x, H)
    (q, q_hw), (k, k_hw), (v, _) = (pool(t, getattr(m, 'pool_' + n),
                                         getattr(m, 'norm_' + n))
                                    for t, n in zip((q, k, v), 'qkv'))
    logits = q * m.scale @ k.transpose(-2, -1)
    if m.rel_pos_spatial:  # q_(a,b) . (Rh[a, c] + Rw[b, d]), key (c, d)
        Rh = rel_pos_rows(m.rel_pos_h, q_hw[0], k_hw[0])
        Rw = rel_pos_rows(m.rel_pos_w, q_hw[1], k_hw[1])
        R = Rh[:, None, :, None] + Rw[None, :, None, :]  # (a, b, c, d, e)
        logits = logits + torch.einsum('bhne,nme->bhnm', q, R.reshape(
            q.shape[2], k.shape[2], -1))
    A = logits.softmax(-1)
    out = A @ v + (q if m.residual_pooling else 0)
    return A, lin(m.proj, out.transpose(1, 2).flatten(2)), q_hw, k_hw


def mvit_layout(model, calls, pix, step, verify):
    """MViTv2: the embedding's windows; per block ``Y' = (P_s Y + M Y) /
    2``, ``P_s`` the skip's max pool windows (their mean, our rule) or the
    identity, ``M Y = Ā (P_k Y)``, with residual pooling ``(P_q Y +
    Ā (P_k Y)) / 2``; the head reads the mean token of the last output
    stage."""
    Y, hw = conv_means(pix, model.patch_embed.projection)
    step(Y)
    ends = {j - 1: s for s, j in enumerate(model.downscale_indices)}
    ends[len(model.blocks) - 1] = len(model.downscale_indices)
    final = None
    for i, (block, (m, args, kwargs, out)) in enumerate(zip(model.blocks,
                                                            calls)):
        A, dense_out, q_hw, k_hw = mvit_attention(m, args, kwargs)
        verify(out[0], dense_out)
        grid, skip = _grid(Y, hw), block.pool_skip
        own = Y if skip is None else window_means(
            grid, q_hw, skip.kernel_size, skip.stride, skip.padding)
        AY = A.mean(1) @ conv_means(grid, m.pool_k)[0]
        if m.residual_pooling:
            AY = (conv_means(grid, m.pool_q)[0] + AY) / 2
        Y, hw = step(own, AY), q_hw
        if ends.get(i) in model.out_scales:
            final = Y.mean(1)
    return final


MVIT = Facts(attentions=(MultiScaleAttention, ), layout=mvit_layout)


# ------------------------------------------------------------- LeViT
def linear_bn(m, x):
    """LeViT's ``LinearBatchNorm`` (or the Linear it fuses to) in float64,
    on batch statistics in training."""
    if isinstance(m, nn.Linear):
        return lin(m, x)
    y, bn = lin(m.linear, x), m.bn
    stats = (None, None) if bn.training else (bn.running_mean.double(),
                                              bn.running_var.double())
    return F.batch_norm(y.flatten(0, 1), *stats, bn.weight.double(),
                        bn.bias.double(), bn.training, 0.,
                        bn.eps).reshape_as(y)


def levit_attention(module, args, kwargs):
    """LeViT's ``Attention`` and ``AttentionSubsample`` (queries of every
    ``stride``-th row and column): (A, the output by hand)."""
    m, x = module, args[0].double()
    B, N, C = x.shape
    kd, H = m.key_dim, m.num_heads
    if isinstance(m, AttentionSubsample):
        k, v = _heads(linear_bn(m.kv, x), B, H).split([kd, m.d], -1)
        r, s = m.resolution, m.stride
        picked = x.reshape(B, r, r, C)[:, ::s, ::s].reshape(B, -1, C)
        q = _heads(linear_bn(m.q[1], picked), B, H)
    else:
        q, k, v = _heads(linear_bn(m.qkv, x), B, H).split([kd, kd, m.d], -1)
    bias = m.attention_biases.double()[:, m.attention_bias_idxs]
    A, out = _attend(q @ k.transpose(-2, -1) * m.scale + bias, v)
    return A, linear_bn(m.proj[1], F.hardswish(out))


def levit_layout(model, calls, pix, step, verify):
    """LeViT: the four stem convs' windows in turn; ``Attention`` blocks by
    the paper's rule, ``AttentionSubsample`` (no residual) ``Y' = Ā Y``;
    the head reads the mean token of the last output stage."""
    Y, hw = conv_stack_means(pix, model.patch_embed)
    Y, it, final = step(Y), iter(calls), None
    for s, stage in enumerate(model.stages):
        for _ in [b for b in stage if isinstance(getattr(b, 'block', b), (
                LeViTAttention, AttentionSubsample))]:
            m, args, kwargs, out = next(it)
            A, dense_out = levit_attention(m, args, kwargs)
            verify(out, dense_out)
            subsample = isinstance(m, AttentionSubsample)
            own = _grid(Y, (m.resolution, ) * 2)[:, ::m.stride, ::m.stride] \
                .flatten(1, 2) if subsample else Y
            Y = step(own, A.mean(1) @ Y, residual=not subsample)
        if s in model.out_indices:
            final = Y.mean(1)
    return final


LEVIT = Facts(attentions=(LeViTAttention, AttentionSubsample),
              layout=levit_layout)


# -------------------------------------------------------------- XCiT
def class_attention(module, x):
    """XCiT's ``ClassAttntion``: the class token queries every token:
    (A ``(B, H, 1, N)``, its output by hand)."""
    m, x = module, x.double()
    B, N, C = x.shape
    q = _heads(lin(m.q, x[:, :1]), B, m.num_heads)
    k, v = (_heads(lin(p, x), B, m.num_heads) for p in (m.k, m.v))
    A, out = _attend(q * m.scale @ k.transpose(-2, -1), v)
    return A, lin(m.proj, out)


def xcit_layout(model, calls, pix, step, verify):
    """XCiT: the embedding's convs' windows in turn; XCA blocks move no
    label (their attention mixes each token's own channels), their LPI
    branch ``Y <- (Y + W Y) / 2`` (``W``: its two 3x3 convs' windows, its
    drop-path the block's second call); the class token joins at the area
    label (the default area share: the pixels' mean); class attention
    moves it alone."""
    Y, hw = conv_stack_means(pix, model.patch_embed)
    Y, it = step(Y), iter(calls)
    for layer in model.xca_layers:
        next(it)
        W = partial(lambda Y, lpi: conv_stack_means(_grid(Y, hw), lpi)[0],
                    lpi=layer.local_mp)
        Y = step(Y, Y, branches=[(W, 1)])
    Y = torch.cat([pix.mean((1, 2))[:, None], Y], 1)
    for layer in model.ca_layers:
        m, args, _, out = next(it)
        A, dense_out = class_attention(m, args[0])
        verify(out, dense_out)
        Y = step(Y, torch.cat([A.mean(1) @ Y, Y[:, 1:]], 1))
    return Y[:, 0] if model.out_type == 'cls_token' else Y[:, 1:].mean(1)


XCIT = Facts(attentions=(XCA, ClassAttntion), layout=xcit_layout)
