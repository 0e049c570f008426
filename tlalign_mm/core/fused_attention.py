"""Head-averaged ``Ā Y`` from the attention call a block already makes.

Labels ride along as extra value channels: with ``v' = [v | Y]`` the fused
kernel returns ``[A v | A Y]`` per head, and ``Ā Y`` is the mean of the last
``S`` channels over heads. The attention matrix is never materialised unless
the attention function itself does so.

With bf16/fp16 tokens or attention dropout the labels take a second,
float32, dropout-free pass: on a GPU the Triton kernel of
:mod:`.triton_labels`, elsewhere a float32 attention call.
"""
from typing import Callable, Tuple

import torch
import torch.nn.functional as F

# Pad the value width to a multiple of this so CPU/GPU fused kernels keep a
# fast path: the kernels want q, k and v of one width, and widths of 8k.
_ALIGN = 8


def _triton_labels():
    # Imported on first use on a GPU: CPU runs never load Triton.
    from . import triton_labels
    return triton_labels


def _expand_heads(labels: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, N, S = labels.shape
    return labels[:, None].expand(B, num_heads, N, S)


def attention_with_labels(attn_fn: Callable,
                          query: torch.Tensor,
                          key: torch.Tensor,
                          value: torch.Tensor,
                          labels: torch.Tensor,
                          attn_mask=None,
                          dropout_p: float = 0.,
                          **kwargs) -> Tuple[torch.Tensor, torch.Tensor]:
    """Run ``attn_fn(q, k, v)`` and return its output and ``mean_h(A) Y``.

    Args:
        attn_fn (Callable): the block's own attention function with the
            signature of
            :func:`torch.nn.functional.scaled_dot_product_attention`
            (it must compute ``dropout(softmax(...)) @ value`` with a scale
            that depends on the query only).
        query, key, value (Tensor): ``(B, H, N, d)`` (keys may have their own
            length ``M``).
        labels (Tensor): ``(B, M, S)`` float32 labels of the keys' tokens.
        attn_mask, dropout_p, kwargs: passed to ``attn_fn``.

    Returns:
        tuple: the attention output ``(B, H, N, d)``, exactly what the block
        consumes, and ``Ā Y`` ``(B, N, S)`` in float32, computed with the
        attention *before* dropout.
    """
    H, d = query.shape[1], value.shape[-1]
    S = labels.shape[-1]
    exact_dtype = query.dtype == torch.float32
    if dropout_p > 0 or not exact_dtype:
        # Dropout would perturb the labels and bf16/fp16 values would round
        # them: compute the block's output as usual and the labels in a
        # second, dropout-free float32 call with the labels as values.
        out = attn_fn(query, key, value, attn_mask=attn_mask,
                      dropout_p=dropout_p, **kwargs)
        if (query.is_cuda and attn_fn is F.scaled_dot_product_attention
                and attn_mask is None and set(kwargs) <= {'scale'}
                and _triton_labels().available(query)):
            # On a GPU: one fused pass from the low-precision q, k (exact
            # float32 logits), instead of a float32 attention call.
            triton_labels = _triton_labels()
            scale = kwargs.get('scale') or query.shape[-1]**-0.5
            return out, triton_labels.mean_head_labels(
                query.detach(), key.detach(), labels.detach(), scale)
        # Autocast would send the float32 call back to bf16: switch it off.
        with torch.no_grad(), torch.autocast(query.device.type,
                                             enabled=False):
            mask = attn_mask
            if mask is not None and mask.dtype != torch.bool:
                mask = mask.float()
            values = _expand_heads(labels.float(), H)
            if S < query.shape[-1]:
                # Zero-pad the labels to the query width: the fused kernels
                # (CPU flash, CUDA memory-efficient) want one width for q, k
                # and v, and would otherwise fall back to explicit attention.
                values = F.pad(values, (0, query.shape[-1] - S))
            attended = attn_fn(query.detach().float(), key.detach().float(),
                               values, attn_mask=mask, dropout_p=0., **kwargs)
        return out, attended[..., :S].mean(1)

    labels = _expand_heads(labels.detach().to(value.dtype), H)
    if attn_fn is F.scaled_dot_product_attention and 'scale' not in kwargs:
        # Zero-pad q and k to the value width (q.k is unchanged) and keep the
        # default scale explicit, so the fused kernel sees equal widths.
        width = -(-(d + S) // _ALIGN) * _ALIGN
        extra = width - d - S
        pad = query.new_zeros(*query.shape[:-1], width - query.shape[-1])
        kpad = key.new_zeros(*key.shape[:-1], width - key.shape[-1])
        vpad = value.new_zeros(*value.shape[:-1], extra)
        out = attn_fn(torch.cat([query, pad], -1), torch.cat([key, kpad], -1),
                      torch.cat([value, labels, vpad], -1),
                      attn_mask=attn_mask, dropout_p=0.,
                      scale=query.shape[-1]**-0.5, **kwargs)
    else:
        out = attn_fn(query, key, torch.cat([value, labels], -1),
                      attn_mask=attn_mask, dropout_p=0., **kwargs)
    return out[..., :d], out[..., d:d + S].detach().mean(1)
