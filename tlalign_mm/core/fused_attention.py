"""Head-averaged ``Ā Y`` from the attention call a block already makes.

:func:`attention_with_labels` returns the block's attention output, exactly
what the block consumes, and ``Ā Y`` in float32, by one of three paths (one
named helper each):

- **labels as extra value channels** (:func:`_ride_along`): with
  ``v' = [v | Y]`` the block's own fused kernel returns ``[A v | A Y]`` per
  head, and ``Ā Y`` is the mean of the last ``S`` channels over heads. No
  attention matrix, and no extra pass over q and k: the cost is ``S`` more
  value channels, plus zero-padding q and k to the value width (the fused
  kernels want one width, a multiple of 8). Used for float32 attention
  without dropout.
- **explicit head-mean attention** (:func:`_explicit`): ``mean_h softmax(q
  k^T s) Y`` without gradients, from the block's q and k. For narrow heads
  the padding above is a large share of the attention's forward *and*
  backward work (a 16-wide head pads to 24: +50%), while this recomputes
  ``q k^T`` once, forward only; it materialises the ``B H N M`` attention,
  so it is used only for heads narrower than :data:`EXPLICIT_MAX_HEAD_DIM`
  and attention up to :data:`EXPLICIT_MAX_ELEMENTS` elements.
- **a second float32 pass** for bf16/fp16 tokens or attention dropout, whose
  labels must come from the float32, dropout-free attention: on a GPU the
  Triton kernel of :mod:`.triton_labels`; elsewhere the explicit path when
  it applies, else a float32 attention call with the labels as values.

Only ``torch.nn.functional.scaled_dot_product_attention`` (whose semantics
the explicit and Triton paths reproduce) takes the explicit and Triton
paths; any other SDPA-like function gets the labels as extra value channels
(or, in a second pass, as its values).
"""
from typing import Callable, Optional, Tuple

import torch
import torch.nn.functional as F

# Pad the value width to a multiple of this so CPU/GPU fused kernels keep a
# fast path: the kernels want q, k and v of one width, and widths of 8k.
_ALIGN = 8
#: Heads narrower than this take the explicit path (the padding of q, k in
#: the ride-along path would then cost more than a forward-only q k^T).
EXPLICIT_MAX_HEAD_DIM = 48
#: ... provided the attention matrix has at most this many elements.
EXPLICIT_MAX_ELEMENTS = 1 << 24


def _triton_labels():
    # Imported on first use on a GPU: CPU runs never load Triton.
    from . import triton_labels
    return triton_labels


def _expand_heads(labels: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, M, S)`` -> ``(B, H, M, S)``, a view (no copy)."""
    return labels.unsqueeze(1).expand(-1, num_heads, -1, -1)


def _is_plain_sdpa(attn_fn: Callable, kwargs: dict) -> bool:
    return attn_fn is F.scaled_dot_product_attention and \
        not kwargs.get('is_causal', False) and set(kwargs) <= {
            'scale', 'is_causal'}


def _explicit_applies(query: torch.Tensor, key: torch.Tensor) -> bool:
    B, H, N, d = query.shape
    return d < EXPLICIT_MAX_HEAD_DIM and \
        B * H * N * key.shape[-2] <= EXPLICIT_MAX_ELEMENTS


def _explicit(query: torch.Tensor, key: torch.Tensor, labels: torch.Tensor,
              attn_mask: Optional[torch.Tensor],
              scale: Optional[float]) -> torch.Tensor:
    """``mean_h softmax(q k^T scale + mask) @ labels`` in float32, without
    gradients; the semantics of ``F.scaled_dot_product_attention`` (a
    boolean mask keeps True, a float mask is added)."""
    with torch.no_grad(), torch.autocast(query.device.type, enabled=False):
        scale = query.shape[-1]**-0.5 if scale is None else scale
        logits = torch.matmul(query.float(), key.float().transpose(-2, -1))
        logits = logits * scale
        if attn_mask is not None:
            logits = logits.masked_fill(~attn_mask, float('-inf')) \
                if attn_mask.dtype == torch.bool else logits + attn_mask
        # (B, N, M) @ (B, M, S): a plain bmm, no broadcasting views.
        return torch.bmm(logits.softmax(-1).mean(1), labels.float())


def _ride_along(attn_fn: Callable, query: torch.Tensor, key: torch.Tensor,
                value: torch.Tensor, labels: torch.Tensor, attn_mask,
                kwargs: dict) -> Tuple[torch.Tensor, torch.Tensor]:
    """The block's attention call with the labels as extra value
    channels."""
    H, d, S = query.shape[1], value.shape[-1], labels.shape[-1]
    labels = labels.to(value.dtype)
    if attn_fn is F.scaled_dot_product_attention:
        # Zero-pad q and k to the value width (q.k is unchanged, the scale
        # is made explicit) so the fused kernel sees equal widths; the
        # labels are padded before they are expanded over the heads.
        width = -(-(d + S) // _ALIGN) * _ALIGN
        if width > d + S:
            labels = F.pad(labels, (0, width - d - S))
        if kwargs.get('scale') is None:
            kwargs = dict(kwargs, scale=query.shape[-1]**-0.5)
        query = F.pad(query, (0, width - query.shape[-1]))
        key = F.pad(key, (0, width - key.shape[-1]))
    out = attn_fn(query, key, torch.cat([value, _expand_heads(labels, H)], -1),
                  attn_mask=attn_mask, dropout_p=0., **kwargs)
    with torch.no_grad():
        attended = out[..., d:d + S].mean(1)
    return out[..., :d], attended


def _second_pass(attn_fn: Callable, query: torch.Tensor, key: torch.Tensor,
                 labels: torch.Tensor, attn_mask, kwargs: dict,
                 plain: bool) -> torch.Tensor:
    """``Ā Y`` from the dropout-free float32 attention of the block's own
    q and k (its output took bf16/fp16 or dropout)."""
    if plain and query.is_cuda and attn_mask is None and \
            not kwargs.get('is_causal', False) and \
            _triton_labels().available(query):
        # One fused pass from the low-precision q, k (exact float32
        # logits), instead of a float32 attention call.
        scale = kwargs.get('scale') or query.shape[-1]**-0.5
        return _triton_labels().mean_head_labels(query.detach(),
                                                 key.detach(), labels, scale)
    if plain and _explicit_applies(query, key):
        return _explicit(query, key, labels, attn_mask, kwargs.get('scale'))
    # Autocast would send the float32 call back to bf16: switch it off.
    with torch.no_grad(), torch.autocast(query.device.type, enabled=False):
        S = labels.shape[-1]
        mask = attn_mask
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.float()
        values = labels.float()
        if S < query.shape[-1]:
            # Zero-pad the labels to the query width: the fused kernels
            # (CPU flash, CUDA memory-efficient) want one width for q, k
            # and v, and would otherwise fall back to explicit attention.
            values = F.pad(values, (0, query.shape[-1] - S))
        attended = attn_fn(query.float(), key.float(),
                           _expand_heads(values, query.shape[1]),
                           attn_mask=mask, dropout_p=0., **kwargs)
    return attended[..., :S].mean(1)


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
        labels (Tensor): ``(B, M, S)`` float32 labels of the keys' tokens,
            without gradient.
        attn_mask, dropout_p, kwargs: passed to ``attn_fn``.

    Returns:
        tuple: the attention output ``(B, H, N, d)``, exactly what the block
        consumes, and ``Ā Y`` ``(B, N, S)`` in float32, computed with the
        attention *before* dropout.
    """
    plain = _is_plain_sdpa(attn_fn, kwargs)
    if dropout_p > 0 or query.dtype != torch.float32:
        out = attn_fn(query, key, value, attn_mask=attn_mask,
                      dropout_p=dropout_p, **kwargs)
        return out, _second_pass(attn_fn, query, key, labels, attn_mask,
                                 kwargs, plain)
    if plain and _explicit_applies(query, key):
        out = attn_fn(query, key, value, attn_mask=attn_mask, dropout_p=0.,
                      **kwargs)
        return out, _explicit(query, key, labels, attn_mask,
                              kwargs.get('scale'))
    return _ride_along(attn_fn, query, key, value, labels, attn_mask, kwargs)
