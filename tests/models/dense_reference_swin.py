"""An independent, dense TL-Align reference for mmpretrain's Swin.

Labels are ``(B, N, C)`` class vectors; each block's window attention is a
single dense ``(Np, Np)`` attention over the whole padded map, built from
coordinates (which window and which shift region each position falls in
after the cyclic shift, the relative position of every pair), never by
rolling and partitioning tensors. Everything runs in float64. Shares no code
with ``tlalign_mm``.

The padding rule under test (our documented choice): padded
positions are zero tokens with zero labels that take part in the attention;
a real token's new label is the paper's ``(Y + ĀY) / 2`` divided by its sum
(``ĀY`` divided by its sum without the residual average).
"""
import copy
from typing import NamedTuple, Optional

import torch


def pixel_label_patches(pixel_weights, targets, patch):
    """(B, S, H, W), (B, S, C) -> (B, h*w, C): mean over each patch's real
    pixels of the per-pixel class label (bottom/right padding is no pixel)."""
    B, S, H, W = pixel_weights.shape
    pix = torch.einsum('bshw,bsc->bhwc', pixel_weights.double(),
                       targets.double())
    h, w = -(-H // patch), -(-W // patch)
    out = torch.zeros(B, h * w, targets.shape[-1], dtype=torch.double)
    for i in range(h):
        for j in range(w):
            cell = pix[:, i * patch:(i + 1) * patch, j * patch:(j + 1) * patch]
            out[:, i * w + j] = cell.reshape(B, -1, cell.shape[-1]).mean(1)
    return out


def merge_by_hand(Y, hw):
    """2x2 patch merging of labels, bottom/right padding carrying no label:
    each merged token is the mean of the real tokens of its group."""
    B, N, C = Y.shape
    H, W = hw
    grid = Y.reshape(B, H, W, C)
    h, w = -(-H // 2), -(-W // 2)
    out = torch.zeros(B, h * w, C, dtype=Y.dtype)
    for i in range(h):
        for j in range(w):
            cell = grid[:, 2 * i:2 * i + 2, 2 * j:2 * j + 2]
            out[:, i * w + j] = cell.reshape(B, -1, C).mean(1)
    return out, (h, w)


def _region(coord, size, ws, shift):
    # mmpretrain's shift mask: slices (0,-ws), (-ws,-shift), (-shift,None)
    # of the shifted map.
    return (coord >= size - ws).long() + (coord >= size - shift).long()


class WindowGrid(NamedTuple):
    """A ``(B, H*W, C)`` map zero-padded to whole windows, and where each
    of its ``Np`` positions falls after the cyclic shift."""
    tokens: torch.Tensor  # (B, Np, C)
    window: torch.Tensor  # (Np, ) window index
    pr: torch.Tensor  # (Np, ) row inside the window
    pc: torch.Tensor  # (Np, ) column inside the window
    region: Optional[torch.Tensor]  # (Np, ) shift region; None: no shift
    real: torch.Tensor  # (Np, ) bool, a position of the unpadded map


def window_grid(x, hw, ws, shift) -> WindowGrid:
    B, N, C = x.shape
    H, W = hw
    Hp, Wp = -(-H // ws) * ws, -(-W // ws) * ws
    grid = x.new_zeros(B, Hp, Wp, C)
    grid[:, :H, :W] = x.reshape(B, H, W, C)
    r = torch.arange(Hp).repeat_interleave(Wp)
    c = torch.arange(Wp).repeat(Hp)
    rs, cs = (r - shift) % Hp, (c - shift) % Wp  # position after the shift
    region = _region(rs, Hp, ws, shift) * 3 + _region(cs, Wp, ws, shift) \
        if shift > 0 else None
    return WindowGrid(grid.reshape(B, Hp * Wp, C),
                      (rs // ws) * (Wp // ws) + cs // ws, rs % ws, cs % ws,
                      region, (r < H) & (c < W))


def relative_index(g: WindowGrid, ws: int) -> torch.Tensor:
    """``(Np, Np)`` index into a ``(2ws-1)^2`` relative position table."""
    return (g.pr[:, None] - g.pr[None] + ws - 1) * (2 * ws - 1) + \
        (g.pc[:, None] - g.pc[None] + ws - 1)


def attend_in_windows(w_msa, logits, v, g: WindowGrid):
    """Softmax of ``logits`` ``(B, heads, Np, Np)`` within each window,
    -100 across shift regions (mmpretrain's mask), applied to ``v`` and
    projected: (output at real positions, head-averaged attention, real)."""
    if g.region is not None:
        logits = logits + (g.region[:, None] != g.region[None]).double() * \
            -100.
    logits = logits.masked_fill(g.window[:, None] != g.window[None],
                                float('-inf'))
    A = logits.softmax(-1)
    B, heads, Np, d = v.shape
    out = w_msa.proj((A @ v).transpose(1, 2).reshape(B, Np, heads * d))
    return out[:, g.real], A.mean(1), g.real


def dense_window_attention(w_msa, x, hw, ws, shift):
    """Window attention of all tokens of a (B, H*W, C) map at once.

    Returns the attention output at real positions (B, H*W, C), the
    head-averaged attention over the padded map (B, Np, Np) and the indices
    of real positions in the padded map.
    """
    B, N, C = x.shape
    g = window_grid(x, hw, ws, shift)
    heads = w_msa.num_heads
    bias = w_msa.relative_position_bias_table.double()[
        relative_index(g, ws)].permute(2, 0, 1)
    qkv = w_msa.qkv(g.tokens).reshape(B, -1, 3, heads,
                                      C // heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    logits = (q * w_msa.scale) @ k.transpose(-2, -1) + bias
    return attend_in_windows(w_msa, logits, v, g)


def dense_swin_labels(swin, images, pixel_weights, targets, patch,
                      residual_norm=True, pad_rule='renormalise'):
    """Forward a mmpretrain SwinTransformer by hand (eval mode, float64) and
    align class-space labels with dense attention.

    ``pad_rule='real_keys'`` is an alternative padding rule (attention
    renormalised over real keys, ``ĀY / m``, inside the residual average),
    only there to show a test case is sensitive to the padding rule.

    Returns (final label (B, C), labels after every block, output tokens of
    the last output stage (B, C', h, w)).
    """
    swin = copy.deepcopy(swin).double()
    swin.eval()  # SwinTransformer.train returns None
    x, hw = swin.patch_embed(images.double())
    Y = pixel_label_patches(pixel_weights, targets, patch)
    history = [Y]
    final = feat = None
    for i, stage in enumerate(swin.stages):
        for j, block in enumerate(stage.blocks):
            attn = block.attn
            ws = attn.window_size
            shift = ws // 2 if j % 2 else 0
            assert attn.shift_size == shift
            if min(hw) == ws and not attn.pad_small_map:
                shift = 0
            out, A, real = dense_window_attention(attn.w_msa, block.norm1(x),
                                                  hw, ws, shift)
            x = x + out
            x = block.ffn(block.norm2(x), identity=x)
            Yp = Y.new_zeros(Y.shape[0], A.shape[-1], Y.shape[-1])
            Yp[:, real] = Y
            AY = (A @ Yp)[:, real]
            if pad_rule == 'real_keys':
                AY = AY / AY.sum(-1, keepdim=True)
            new = (Y + AY) / 2 if residual_norm else AY
            Y = new / new.sum(-1, keepdim=True)
            history.append(Y)
        if stage.downsample is not None and swin.out_after_downsample:
            x, hw_new = stage.downsample(x, hw)
            Y, hw = merge_by_hand(Y, hw)
            assert tuple(hw) == tuple(hw_new)
        if i in swin.out_indices:
            final = Y.mean(1)
            feat = getattr(swin, f'norm{i}')(x).reshape(
                -1, *hw, x.shape[-1]).permute(0, 3, 1, 2)
        if stage.downsample is not None and not swin.out_after_downsample:
            x, hw_new = stage.downsample(x, hw)
            Y, hw = merge_by_hand(Y, hw)
            assert tuple(hw) == tuple(hw_new)
    return final, history, feat
