"""An independent, dense TL-Align reference for mmpretrain's ``BEiTViT``.

Forwards the backbone by hand from its parameters (eval mode): q, k, v from
``qkv.weight`` and ``q_bias``/``v_bias``, the scale, the relative position
bias looked up by a loop over token pairs (per-layer tables or the shared
one), explicit softmax, layer scale; labels are ``(B, N, C)`` class vectors
from a per-pixel loop, moved block by block. Shares no code with
``tlalign_mm``.
"""
import torch
import torch.nn.functional as F

from .dense_reference import brute_force_patch_labels


def relative_bias(table, grid):
    """``(H, N, N)`` bias of a BEiT table ``((2h-1)(2w-1) + 3, H)`` on an
    ``h x w`` grid (BEiT, Bao et al. 2022, Sec. 2.6): patch pairs by their
    offset, then query cls -> token, token -> key cls, cls -> cls."""
    h, w = grid
    L = table.shape[0]
    cells = [(i, j) for i in range(h) for j in range(w)]
    n = len(cells) + 1
    index = torch.zeros(n, n, dtype=torch.long)
    for a, (ya, xa) in enumerate(cells, 1):
        for b, (yb, xb) in enumerate(cells, 1):
            index[a, b] = (ya - yb + h - 1) * (2 * w - 1) + (xa - xb + w - 1)
    index[0, 1:], index[1:, 0], index[0, 0] = L - 3, L - 2, L - 1
    return table[index].permute(2, 0, 1)


def dense_beit_labels(beit, images, pixel_weights, targets, area_share,
                      patch):
    """Returns (final label (B, C), per-block labels, the head's input)."""
    B = images.shape[0]
    x, hw = beit.patch_embed(images)
    n_extra = beit.num_extra_tokens
    if n_extra:
        x = torch.cat([beit.cls_token.expand(B, -1, -1), x], 1)
    if beit.pos_embed is not None:
        x = x + beit.pos_embed
    shared = None
    if beit.rel_pos_bias is not None:
        shared = relative_bias(beit.rel_pos_bias.relative_position_bias_table,
                               hw)
    targets = targets.double()
    Y = brute_force_patch_labels(pixel_weights, targets, patch)
    if n_extra:
        cls_label = torch.einsum('bs,bsc->bc', area_share.double(), targets)
        Y = torch.cat([cls_label[:, None], Y], 1)
    history = [Y]
    for layer in beit.layers:
        attn = layer.attn
        h = layer.ln1(x)
        N, H = h.shape[1], attn.num_heads
        W = attn.qkv.weight
        d = W.shape[0] // 3
        q = h @ W[:d].T + attn.q_bias
        k = h @ W[d:2 * d].T
        v = h @ W[2 * d:].T + attn.v_bias
        q, k, v = (t.reshape(B, N, H, -1).transpose(1, 2) for t in (q, k, v))
        logits = q @ k.transpose(-2, -1) * (d // H)**-0.5
        if attn.relative_position_bias_table is not None:
            logits = logits + relative_bias(
                attn.relative_position_bias_table, hw)
        if shared is not None:
            logits = logits + shared
        A = torch.softmax(logits, -1)
        out = attn.proj((A @ v).transpose(1, 2).reshape(B, N, -1))
        ffn = layer.ffn
        if layer.gamma_1 is not None:
            x = x + layer.gamma_1 * out
            x = x + layer.gamma_2 * ffn(layer.ln2(x))
        else:
            x = x + out
            x = x + ffn(layer.ln2(x))
        Y = (Y + A.mean(1).double() @ Y) / 2
        history.append(Y)
    if beit.final_norm:
        x = beit.ln1(x)
    if beit.out_type == 'cls_token':
        return Y[:, 0], history, x[:, 0]
    feat = F.layer_norm(x[:, n_extra:].mean(1), x.shape[-1:],
                        beit.ln2.weight, beit.ln2.bias, beit.ln2.eps)
    return Y[:, n_extra:].mean(1), history, feat
