"""An independent, dense TL-Align reference for mmdet's PVT / PVTv2.

Labels are ``(B, N, C)`` class vectors; every window mean (patch embeddings,
spatial reduction) is a loop over output positions that averages the real
input positions under the window; the attention is computed by hand from
``nn.MultiheadAttention``'s projection weights. Everything runs in float64.
Shares no code with ``tlalign_mm``.
"""
import copy

import torch


def window_labels_by_hand(label_map, kernel, stride, padding):
    """(B, H, W, C) -> ((B, h*w, C), (h, w)): each output position of a
    conv (square kernel/stride/padding) gets the mean label of the real
    input positions under its window."""
    B, H, W, C = label_map.shape
    h = (H + 2 * padding - kernel) // stride + 1
    w = (W + 2 * padding - kernel) // stride + 1
    out = torch.zeros(B, h * w, C, dtype=torch.double)
    for i in range(h):
        for j in range(w):
            r0, c0 = i * stride - padding, j * stride - padding
            cell = label_map[:, max(r0, 0):max(r0 + kernel, 0),
                             max(c0, 0):max(c0 + kernel, 0)]
            out[:, i * w + j] = cell.reshape(B, -1, C).mean(1)
    return out, (h, w)


def _geometry(conv):
    (k, _), (s, _), (p, _) = conv.kernel_size, conv.stride, conv.padding
    return k, s, p


def dense_attention(mha, x_q, x_kv):
    """(B, N, C), (B, M, C) -> output (B, N, C), head-averaged A (B, N, M)."""
    B, N, C = x_q.shape
    heads = mha.num_heads
    d = C // heads
    Wq, Wk, Wv = mha.in_proj_weight.chunk(3)
    bq, bk, bv = mha.in_proj_bias.chunk(3)

    def split(t):
        return t.reshape(B, -1, heads, d).transpose(1, 2)

    q, k, v = split(x_q @ Wq.T + bq), split(x_kv @ Wk.T + bk), \
        split(x_kv @ Wv.T + bv)
    A = (q @ k.transpose(-2, -1) / d**0.5).softmax(-1)
    out = (A @ v).transpose(1, 2).reshape(B, N, C)
    return mha.out_proj(out), A.mean(1)


def dense_pvt_labels(pvt, images, pixel_weights, targets):
    """Forward a mmdet PVT by hand (eval mode, float64) and align
    class-space labels.

    Returns (final label (B, C), labels after every encoder layer, output
    tokens of the last output stage (B, C', h, w)).
    """
    pvt = copy.deepcopy(pvt).double()
    pvt.eval()
    x = images.double()
    Ymap = torch.einsum('bshw,bsc->bhwc', pixel_weights.double(),
                        targets.double())
    history = []
    final = feat = None
    for i, (embed, blocks, norm) in enumerate(pvt.layers):
        x, hw = embed(x)
        Y, hw_labels = window_labels_by_hand(Ymap, *_geometry(
            embed.projection))
        assert tuple(hw_labels) == tuple(hw)
        if i == 0:
            history.append(Y)
        for block in blocks:
            if not hasattr(block, 'attn'):  # the absolute position embedding
                x = block(x, hw)
                continue
            sra = block.attn
            h = block.norm1(x)
            Ymap = Y.reshape(-1, *hw, Y.shape[-1])
            if sra.sr_ratio > 1:
                h_kv = sra.sr(h.transpose(1, 2).reshape(-1, h.shape[-1], *hw))
                h_kv = sra.norm(h_kv.flatten(2).transpose(1, 2))
                Y_kv, _ = window_labels_by_hand(Ymap, *_geometry(sra.sr))
            else:
                h_kv, Y_kv = h, Y
            out, A = dense_attention(sra.attn, h, h_kv)
            x = x + out
            x = block.ffn(block.norm2(x), hw, identity=x)
            Y = (Y + A @ Y_kv) / 2
            history.append(Y)
        x = norm(x)
        x = x.transpose(1, 2).reshape(x.shape[0], -1, *hw)
        Ymap = Y.reshape(-1, *hw, Y.shape[-1])
        if i in pvt.out_indices:
            final, feat = Y.mean(1), x
    return final, history, feat
