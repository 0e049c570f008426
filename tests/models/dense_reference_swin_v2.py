"""An independent, dense TL-Align reference for mmpretrain's
``SwinTransformerV2``, computed from the model's parameters.

As :mod:`.dense_reference_swin` (whose label helpers it uses): labels are
``(B, N, C)`` class vectors, each block's window attention one dense
``(Np, Np)`` attention over the whole padded map built from coordinates,
float64, no code shared with ``tlalign_mm``. What is V2's, written out here
from the Swin V2 paper (Liu et al. 2022, Sec. 3.2-3.3) rather than from
``WindowMSAV2``:

- cosine attention ``cos(q, k) * exp(min(logit_scale, log 100))`` per head;
- continuous position bias: the relative offsets ``(dy, dx)``, divided by
  ``pretrained_window_size - 1`` (else ``window_size - 1``), times 8,
  log-spaced ``sign(t) log2(1 + |t|) / log2(8)``, through the two-layer
  ``cpb_mlp``, then ``16 * sigmoid``;
- ``q`` and ``v`` biases, no ``k`` bias;
- res-post-norm blocks ``x + norm1(attn(x))``, ``x + norm2(ffn(x))``
  (``norm3`` after every ``extra_norm_every_n_blocks``-th block);
- each stage merges patches *before* its blocks.
"""
import copy
import math

import torch

from .dense_reference_swin import (
    attend_in_windows,
    merge_by_hand,
    pixel_label_patches,
    window_grid,
)


def continuous_position_bias(cpb_mlp, ws, pretrained_ws):
    """The bias of every offset, ``(2ws-1, 2ws-1, heads)``, indexed by
    ``dy + ws - 1, dx + ws - 1``."""
    offsets = torch.arange(-(ws - 1), ws, dtype=torch.double)
    t = offsets / ((pretrained_ws if pretrained_ws > 0 else ws) - 1) * 8
    t = torch.sign(t) * torch.log2(1 + t.abs()) / math.log2(8)
    coords = torch.stack(torch.meshgrid(t, t, indexing='ij'), -1)
    first, last = cpb_mlp[0], cpb_mlp[2]
    hidden = torch.relu(coords @ first.weight.double().T + first.bias.double())
    return 16 * torch.sigmoid(hidden @ last.weight.double().T)


def dense_window_attention_v2(w_msa, x, hw, ws, shift, pretrained_ws):
    """V2 window attention of all tokens of a ``(B, H*W, C)`` map at once.

    Returns the attention output at real positions ``(B, H*W, C)``, the
    head-averaged attention over the padded map ``(B, Np, Np)`` and the
    real positions in the padded map.
    """
    B, N, C = x.shape
    g = window_grid(x, hw, ws, shift)
    heads = w_msa.num_heads
    table = continuous_position_bias(w_msa.cpb_mlp, ws, pretrained_ws)
    bias = table[g.pr[:, None] - g.pr[None] + ws - 1,
                 g.pc[:, None] - g.pc[None] + ws - 1].permute(2, 0, 1)
    Wq, Wk, Wv = w_msa.qkv.weight.double().chunk(3)
    q = g.tokens @ Wq.T + w_msa.q_bias.double()
    k = g.tokens @ Wk.T
    v = g.tokens @ Wv.T + w_msa.v_bias.double()
    q, k, v = (t.reshape(B, -1, heads, C // heads).transpose(1, 2)
               for t in (q, k, v))
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    scale = w_msa.logit_scale.double().clamp(max=math.log(100)).exp()
    logits = q @ k.transpose(-2, -1) * scale + bias
    return attend_in_windows(w_msa, logits, v, g)


def dense_swin_v2_labels(swin, images, pixel_weights, targets, patch,
                         pretrained_window_sizes, residual_norm=True):
    """Forward a mmpretrain ``SwinTransformerV2`` by hand (eval mode,
    float64) and align class-space labels with dense attention.

    Returns (final label (B, C), labels after every block, output tokens of
    the last output stage (B, C', h, w)).
    """
    swin = copy.deepcopy(swin).double()
    swin.eval()
    x, hw = swin.patch_embed(images.double())
    Y = pixel_label_patches(pixel_weights, targets, patch)
    history = [Y]
    final = feat = None
    for i, stage in enumerate(swin.stages):
        if stage.downsample is not None:
            x, hw_new = stage.downsample(x, hw)
            Y, hw = merge_by_hand(Y, hw)
            assert tuple(hw) == tuple(hw_new)
        for j, block in enumerate(stage.blocks):
            attn = block.attn
            ws = attn.window_size
            shift = ws // 2 if j % 2 else 0
            assert attn.shift_size == shift
            if min(hw) == ws and not attn.pad_small_map:
                shift = 0
            out, A, real = dense_window_attention_v2(
                attn.w_msa, x, hw, ws, shift, pretrained_window_sizes[i])
            x = x + block.norm1(out)
            x = x + block.norm2(block.ffn(x))
            if block.extra_norm:
                x = block.norm3(x)
            Yp = Y.new_zeros(Y.shape[0], A.shape[-1], Y.shape[-1])
            Yp[:, real] = Y
            AY = (A @ Yp)[:, real]
            new = (Y + AY) / 2 if residual_norm else AY
            Y = new / new.sum(-1, keepdim=True)
            history.append(Y)
        if i in swin.out_indices:
            final = Y.mean(1)
            feat = getattr(swin, f'norm{i}')(x).reshape(
                -1, *hw, x.shape[-1]).permute(0, 3, 1, 2)
    return final, history, feat
