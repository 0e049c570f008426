"""An independent, dense TL-Align reference for tests.

Explicit attention matrices, labels as ``(B, N, C)`` class vectors, initial
labels from a per-pixel loop. Shares no code with ``tlalign_mm``.
"""
import torch


def brute_force_patch_labels(pixel_weights, targets, patch):
    """(B, S, H, W), (B, S, C) -> (B, h*w, C): mean over each patch's real
    pixels of the per-pixel class label (bottom/right padding is not a
    pixel)."""
    B, S, H, W = pixel_weights.shape
    pixel_labels = torch.einsum('bshw,bsc->bhwc', pixel_weights.double(),
                                targets.double())
    h, w = -(-H // patch), -(-W // patch)
    out = torch.zeros(B, h * w, targets.shape[-1], dtype=torch.double)
    for i in range(h):
        for j in range(w):
            cell = pixel_labels[:, i * patch:(i + 1) * patch,
                                j * patch:(j + 1) * patch]
            out[:, i * w + j] = cell.reshape(B, -1, cell.shape[-1]).mean(1)
    return out


def dense_vit_labels(vit, images, pixel_weights, targets, area_share,
                     patch, align_layers=None, residual_norm=True,
                     keeps=None):
    """Forward a mmpretrain VisionTransformer by hand (eval mode, no dropout)
    and align class-space labels with explicit attention.

    Returns (final label (B, C), per-layer labels list, final tokens).
    """
    B = images.shape[0]
    x, hw = vit.patch_embed(images)
    extra = []
    if vit.cls_token is not None:
        extra.append(vit.cls_token.expand(B, -1, -1))
    if getattr(vit, 'dist_token', None) is not None:
        extra.append(vit.dist_token.expand(B, -1, -1))
    x = torch.cat(extra + [x], 1)
    from mmpretrain.models.utils import resize_pos_embed
    x = x + resize_pos_embed(vit.pos_embed, vit.patch_resolution, hw,
                             mode=vit.interpolate_mode,
                             num_extra_tokens=vit.num_extra_tokens)
    x = vit.pre_norm(x)
    targets = targets.double()
    Y = brute_force_patch_labels(pixel_weights, targets, patch)
    n_extra = vit.num_extra_tokens
    if n_extra:
        cls_label = torch.einsum('bs,bsc->bc', area_share.double(), targets)
        Y = torch.cat([cls_label[:, None].expand(-1, n_extra, -1), Y], 1)
    history = [Y]
    L = len(vit.layers)
    for i, layer in enumerate(vit.layers):
        attn_mod = layer.attn
        h = layer.ln1(x)
        N = h.shape[1]
        qkv = attn_mod.qkv(h).reshape(B, N, 3, attn_mod.num_heads,
                                      attn_mod.head_dims)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        A = torch.softmax(q @ k.transpose(-2, -1) * attn_mod.head_dims**-0.5,
                          -1)
        out = (A @ v).transpose(1, 2).reshape(B, N, -1)
        out = attn_mod.gamma1(attn_mod.proj(out))
        aligned = align_layers is None or i in align_layers or \
            (i - L) in align_layers
        if aligned:
            AY = A.mean(1).double() @ Y
            new = (Y + AY) / 2 if residual_norm else AY
            if keeps is not None and keeps[i] is not None:
                new = torch.where(keeps[i].view(-1, 1, 1), new, Y)
            Y = new
        x = x + out
        x = layer.ffn(layer.ln2(x), identity=x)
        history.append(Y)
    if vit.final_norm:
        x = vit.ln1(x)
    if vit.out_type == 'cls_token':
        final = Y[:, 0]
    else:
        final = Y[:, n_extra:].mean(1)
    return final, history, x
