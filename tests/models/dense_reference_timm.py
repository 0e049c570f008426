"""An independent, dense TL-Align reference for timm's VisionTransformer.

Explicit attention matrices computed by hand from each block's weights,
labels as ``(B, N, C)`` class vectors in float64, initial labels from the
per-pixel loop of :mod:`.dense_reference`. Shares no code with
``tlalign_mm``; the tokens come from timm's own embedding and modules.
"""
import torch

from .dense_reference import brute_force_patch_labels


def is_res_post(block):
    return type(block).__name__ == 'ResPostBlock'


def block_attention(block, x):
    """``(B, H, N, N)`` softmax attention of ``block`` on its input tokens
    ``x``, and the attention branch's output (before layer scale), by
    hand from the block's weights."""
    attn = block.attn
    B, N, _ = x.shape
    h = x if is_res_post(block) else block.norm1(x)
    qkv = attn.qkv(h).reshape(B, N, 3, attn.num_heads, attn.head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    q, k = attn.q_norm(q), attn.k_norm(k)
    A = torch.softmax(q @ k.transpose(-2, -1) * attn.head_dim**-0.5, -1)
    out = (A @ v).transpose(1, 2).reshape(B, N, -1)
    return A, attn.proj(attn.norm(out))


def dense_timm_forward(model, images):
    """Each block's input tokens and the final normed tokens, by hand (eval:
    no dropout, no drop-path)."""
    x = model.norm_pre(model._pos_embed(model.patch_embed(images)))
    inputs = []
    for block in model.blocks:
        inputs.append(x)
        _, out = block_attention(block, x)
        if is_res_post(block):
            x = x + block.norm1(out)
            x = x + block.norm2(block.mlp(x))
        else:
            x = x + block.ls1(out)
            x = x + block.ls2(block.mlp(block.norm2(x)))
    return inputs, model.norm(x)


def initial_labels(model, pixel_weights, targets, area_share, patch):
    """``(B, P + N, C)``: every prefix token (class, distillation,
    registers) starts at ``area_share``, patches at their pixels' mean."""
    Y = brute_force_patch_labels(pixel_weights, targets, patch)
    prefix = model.num_prefix_tokens
    cls_label = torch.einsum('bs,bsc->bc', area_share.double(),
                             targets.double())
    return torch.cat([cls_label[:, None].expand(-1, prefix, -1), Y], 1)


def dense_timm_labels(model, block_inputs, Y, keeps=None):
    """Labels before the first block and after every block:
    ``Y <- (Y + mean_h(A) Y) / 2``, kept where drop-path dropped the
    branch (``keeps[i]`` ``(B,)`` bool)."""
    history = [Y]
    for i, (block, x) in enumerate(zip(model.blocks, block_inputs)):
        A, _ = block_attention(block, x)
        new = (Y + A.mean(1).double() @ Y) / 2
        if keeps is not None:
            new = torch.where(keeps[i].view(-1, 1, 1), new, Y)
        Y = new
        history.append(Y)
    return history


def dense_readout(model, Y):
    """What timm's ``forward_head`` reads, applied to labels."""
    if getattr(model, 'dist_token', None) is not None:
        return (Y[:, 0] + Y[:, 1]) / 2
    if model.global_pool == 'token':
        return Y[:, 0]
    assert model.global_pool == 'avg'
    start = 0 if model.pool_include_prefix else model.num_prefix_tokens
    return Y[:, start:].mean(1)
