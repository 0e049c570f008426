"""An independent, dense TL-Align reference for SPT and LSA (SL-ViT, SL-Swin).

Everything here is written from the definitions, in float64, and shares no
code with ``tlalign_mm``:

- SPT tokens and labels from the per-position definition: view ``v`` of the
  input holds ``x[r + dy_v, c + dx_v]`` at ``(r, c)`` (zero outside), with
  ``(dy, dx)`` in ``[(0, 0), (-s, -s), (-s, s), (s, -s), (s, s)]``; a token
  of patch ``(i, j)`` reads, in every view, the positions of its patch
  window (bottom/right positions past the map are padding). Its feature is
  the values read, ordered (patch row, patch column, view, channel); its
  label is the mean label of the *real* positions read over all five views.
- LSA attention as explicit matrices: logits ``scale_h * q.k`` (+ Swin's
  relative position bias and shift mask), ``-inf`` on the diagonal,
  softmax.
- Labels as ``(B, N, C)`` class vectors; Swin windows as one dense
  attention over the whole padded map built from coordinates, with the
  documented padding rule (padded keys carry zero labels; a real
  token's update is renormalised to sum 1).
"""
import copy

import torch
from mmpretrain.models.utils import resize_pos_embed

from .dense_reference_swin import (
    attend_in_windows,
    relative_index,
    window_grid,
)


def offsets(shift):
    s = shift
    return [(0, 0), (-s, -s), (-s, s), (s, -s), (s, s)]


def _reads(H, W, patch, shift):
    """Every read a token makes, as ``(a, b, view, rows, cols, valid)``:
    at patch position ``(a, b)`` of token ``(i, j)``, view ``(dy, dx)``
    reads position ``(i*p + a + dy, j*p + b + dx)``; it is real only if the
    patch position is inside the map (not corner padding) and the read
    position is too (not shift padding). ``rows``/``cols``/``valid`` are
    ``(h, w)`` grids over the tokens."""
    h, w = -(-H // patch), -(-W // patch)
    i = torch.arange(h)[:, None].expand(h, w)
    j = torch.arange(w)[None, :].expand(h, w)
    for a in range(patch):
        for b in range(patch):
            r0, c0 = i * patch + a, j * patch + b
            for v, (dy, dx) in enumerate(offsets(shift)):
                r, c = r0 + dy, c0 + dx
                valid = (r0 < H) & (c0 < W) & (r >= 0) & (r < H) & \
                    (c >= 0) & (c < W)
                yield a, b, v, r.clamp(0, H - 1), c.clamp(0, W - 1), valid


def brute_force_spt_labels(label_map, patch, shift):
    """``(B, C, H, W)`` class-space labels of positions -> ``(B, h*w, C)``
    labels of the SPT tokens (corner padding): the mean over every real
    read of the five views."""
    label_map = label_map.double()
    B, C, H, W = label_map.shape
    h, w = -(-H // patch), -(-W // patch)
    total = torch.zeros(B, C, h, w, dtype=torch.double)
    count = torch.zeros(h, w, dtype=torch.double)
    for _, _, _, r, c, valid in _reads(H, W, patch, shift):
        total += label_map[:, :, r, c] * valid
        count += valid
    return (total / count).flatten(2).transpose(1, 2)


def brute_force_spt_tokens(spt, x):
    """SPT of an image ``(B, C, H, W)`` from the definition (float64, corner
    padding, patch and shift from ``spt``; its LayerNorm and Linear
    weights): feature ``(a, b, view, channel)`` of a token is its read, 0
    if not real."""
    x = x.double()
    B, C, H, W = x.shape
    p = spt.patch_size[0]
    s = spt.shift_size[0]
    h, w = -(-H // p), -(-W // p)
    feats = torch.zeros(B, h, w, p, p, 5, C, dtype=torch.double)
    for a, b, v, r, c, valid in _reads(H, W, p, s):
        feats[:, :, :, a, b, v] = (x[:, :, r, c] * valid).permute(0, 2, 3, 1)
    feats = feats.reshape(B, h * w, -1)
    norm = spt.norm
    mean = feats.mean(-1, keepdim=True)
    var = feats.var(-1, unbiased=False, keepdim=True)
    feats = (feats - mean) / torch.sqrt(var + norm.eps)
    feats = feats * norm.weight.double() + norm.bias.double()
    lin = spt.reduction
    return feats @ lin.weight.double().T + lin.bias.double(), (h, w)


def brute_force_tokens_of_map(spt, tokens, hw):
    """SPT pooling of a token map ``(B, H*W, C)`` by loops."""
    B, N, C = tokens.shape
    grid = tokens.reshape(B, *hw, C).permute(0, 3, 1, 2)
    return brute_force_spt_tokens(spt, grid)


def patch_mean_labels(label_map, patch):
    """Mean over each patch's real positions (a plain patch embedding)."""
    B, C, H, W = label_map.shape
    h, w = -(-H // patch), -(-W // patch)
    out = torch.zeros(B, h * w, C, dtype=torch.double)
    for i in range(h):
        for j in range(w):
            cell = label_map[:, :, i * patch:(i + 1) * patch,
                             j * patch:(j + 1) * patch].double()
            out[:, i * w + j] = cell.reshape(B, C, -1).mean(-1)
    return out


def pixel_labels(pixel_weights, targets):
    """(B, S, H, W), (B, S, C) -> (B, C, H, W) per-pixel class labels."""
    return torch.einsum('bshw,bsc->bchw', pixel_weights.double(),
                        targets.double())


def lsa_like(attn):
    return hasattr(attn, 'diagonal_masking')


def explicit_attention(attn, q, k):
    """(B, H, N, N) attention of mmpretrain MHA or LSA, from raw q, k."""
    N = q.shape[-2]
    if lsa_like(attn):
        scale = attn.scale.double().view(1, -1, 1, 1)
        logits = (q @ k.transpose(-2, -1)) * scale
        if attn.diagonal_masking and N > 1:
            logits = logits + torch.diag(
                torch.full((N, ), float('-inf'), dtype=torch.double))
    else:
        logits = (q @ k.transpose(-2, -1)) * q.shape[-1]**-0.5
    return logits.softmax(-1)


def dense_sl_vit_labels(vit, images, pixel_weights, targets, area_share,
                        spt_centre_labels=False):
    """Forward an (SL-)ViT by hand in float64 (eval, no dropout) and align
    class-space labels with explicit attention. ``spt_centre_labels``: an
    SPT's tokens start with their own patch's mean label (the unshifted
    view) instead of the five views'.

    Returns (final label (B, C), labels before/after every layer, final
    tokens).
    """
    vit = copy.deepcopy(vit).double()
    vit.eval()
    B, _, H, W = images.shape
    pe = vit.patch_embed
    spt = hasattr(pe, 'shift_size')
    if spt:
        x, hw = brute_force_spt_tokens(pe, images)
        if spt_centre_labels:
            Y = patch_mean_labels(pixel_labels(pixel_weights, targets),
                                  pe.patch_size[0])
        else:
            Y = brute_force_spt_labels(pixel_labels(pixel_weights, targets),
                                       pe.patch_size[0], pe.shift_size[0])
    else:
        x, hw = pe(images.double())
        Y = patch_mean_labels(pixel_labels(pixel_weights, targets),
                              pe.projection.kernel_size[0])
    if vit.cls_token is not None:
        x = torch.cat([vit.cls_token.expand(B, -1, -1), x], 1)
        cls_label = torch.einsum('bs,bsc->bc', area_share.double(),
                                 targets.double())
        Y = torch.cat([cls_label[:, None], Y], 1)
    x = x + resize_pos_embed(vit.pos_embed, vit.patch_resolution, hw,
                             mode=vit.interpolate_mode,
                             num_extra_tokens=vit.num_extra_tokens)
    x = vit.pre_norm(x)
    history = [Y]
    for layer in vit.layers:
        a = layer.attn
        h = layer.ln1(x)
        N = h.shape[1]
        qkv = a.qkv(h).reshape(B, N, 3, a.num_heads,
                               a.head_dims).permute(2, 0, 3, 1, 4)
        A = explicit_attention(a, qkv[0], qkv[1])
        out = (A @ qkv[2]).transpose(1, 2).reshape(B, N, -1)
        x = x + a.gamma1(a.proj(out))
        x = layer.ffn(layer.ln2(x), identity=x)
        Y = (Y + A.mean(1) @ Y) / 2
        history.append(Y)
    if vit.final_norm:
        x = vit.ln1(x)
    n_extra = vit.num_extra_tokens
    final = Y[:, 0] if vit.out_type == 'cls_token' else \
        Y[:, n_extra:].mean(1)
    return final, history, x


def dense_windows(w_msa, x, hw, ws, shift):
    """All (LSA or plain) window attentions of a (B, H*W, C) map as one
    dense (B, heads, Np, Np) attention over the padded map."""
    B, N, C = x.shape
    g = window_grid(x, hw, ws, shift)
    heads = w_msa.num_heads
    bias = w_msa.relative_position_bias_table.double()[
        relative_index(g, ws)].permute(2, 0, 1)
    qkv = w_msa.qkv(g.tokens).reshape(B, -1, 3, heads,
                                      C // heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    if lsa_like(w_msa):
        scale = w_msa.scale.double().view(1, -1, 1, 1)
    else:
        scale = w_msa.scale
    logits = (q * scale) @ k.transpose(-2, -1) + bias
    if lsa_like(w_msa) and w_msa.diagonal_masking:
        logits = logits.masked_fill(
            torch.eye(len(g.window), dtype=torch.bool), float('-inf'))
    return attend_in_windows(w_msa, logits, v, g)


def merge_by_hand(Y, hw):
    """2x2 patch merging of labels (mean of the real tokens of a group)."""
    B, N, C = Y.shape
    grid = Y.reshape(B, *hw, C).permute(0, 3, 1, 2)
    return patch_mean_labels(grid, 2), (-(-hw[0] // 2), -(-hw[1] // 2))


def dense_sl_swin_labels(swin, images, pixel_weights, targets):
    """Forward an (SL-)Swin by hand in float64 (eval) and align class-space
    labels with dense window attention; SPT tokens and labels by loops.

    Returns (final label (B, C), labels after every block, output tokens of
    the last output stage (B, C', h, w)).
    """
    swin = copy.deepcopy(swin).double()
    swin.eval()
    pe = swin.patch_embed
    spt = hasattr(pe, 'shift_size')
    labels = pixel_labels(pixel_weights, targets)
    if spt:
        x, hw = brute_force_spt_tokens(pe, images)
        Y = brute_force_spt_labels(labels, pe.patch_size[0],
                                   pe.shift_size[0])
    else:
        x, hw = pe(images.double())
        Y = patch_mean_labels(labels, pe.projection.kernel_size[0])
    history = [Y]
    final = feat = None

    def downsample(stage, x, Y, hw):
        ds = stage.downsample
        if hasattr(ds, 'shift_size'):
            x_new, hw_new = brute_force_tokens_of_map(ds, x, hw)
            grid = Y.reshape(Y.shape[0], *hw, -1).permute(0, 3, 1, 2)
            Y_new = brute_force_spt_labels(grid, ds.patch_size[0],
                                           ds.shift_size[0])
        else:
            x_new, hw_new = ds(x, hw)
            Y_new, _ = merge_by_hand(Y, hw)
        return x_new, Y_new, tuple(hw_new)

    for i, stage in enumerate(swin.stages):
        for j, block in enumerate(stage.blocks):
            attn = block.attn
            ws = attn.window_size
            shift = attn.shift_size
            if min(hw) == ws and not attn.pad_small_map:
                shift = 0
            out, A, real = dense_windows(attn.w_msa, block.norm1(x), hw, ws,
                                         shift)
            x = x + out
            x = block.ffn(block.norm2(x), identity=x)
            Yp = Y.new_zeros(Y.shape[0], A.shape[-1], Y.shape[-1])
            Yp[:, real] = Y
            new = (Y + (A @ Yp)[:, real]) / 2
            Y = new / new.sum(-1, keepdim=True)
            history.append(Y)
        if stage.downsample is not None and swin.out_after_downsample:
            x, Y, hw = downsample(stage, x, Y, hw)
        if i in swin.out_indices:
            final = Y.mean(1)
            feat = getattr(swin, f'norm{i}')(x).reshape(
                -1, *hw, x.shape[-1]).permute(0, 3, 1, 2)
        if stage.downsample is not None and not swin.out_after_downsample:
            x, Y, hw = downsample(stage, x, Y, hw)
    return final, history, feat

