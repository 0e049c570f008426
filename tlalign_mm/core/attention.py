"""``Ā Y``: the head-averaged attention of a block applied to labels.

:func:`head_mean_attention` computes it from a block's recorded queries and
keys, in float32 without gradients, by one of three paths (``impl``;
``'auto'`` picks by the measurements in ``docs/performance.md``):

- ``'sdpa'``: ``F.scaled_dot_product_attention`` with the labels as values
  (zero-padded to the head width, which the fused CPU flash and CUDA
  memory-efficient kernels want), then the head mean; no attention matrix.
- ``'triton'``: the fused GPU kernel of :mod:`.triton_labels`, from the
  block's own q and k; no bias, one float scale.
- ``'explicit'``: the attention matrix materialised: for narrow heads a
  ``q k^T`` is cheaper than the padded SDPA call.

A block that computes its softmax itself (Swin's ``WindowMSA``, PVT's
``nn.MultiheadAttention``) records the probabilities instead, and ``Ā Y`` is
one ``bmm`` (:func:`mean_probs_attention`).
"""
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F

#: The paths of :func:`head_mean_attention`.
IMPLS = ('auto', 'sdpa', 'triton', 'explicit')
#: ``'auto'`` takes the explicit path for heads narrower than this ...
EXPLICIT_MAX_HEAD_DIM = 48
#: ... provided the attention matrix has at most this many elements.
EXPLICIT_MAX_ELEMENTS = 1 << 24

Scale = Union[float, torch.Tensor, None]


def _triton_labels():
    # Imported on first use on a GPU: CPU runs never load Triton.
    from . import triton_labels
    return triton_labels


def _float_scale(scale: Scale) -> bool:
    return scale is None or not isinstance(scale, torch.Tensor)


def choose_impl(query: torch.Tensor, key: torch.Tensor,
                bias: Optional[torch.Tensor] = None,
                scale: Scale = None) -> str:
    """The path ``impl='auto'`` takes for these inputs."""
    if query.is_cuda and bias is None and _float_scale(scale) and \
            _triton_labels().available(query):
        return 'triton'
    B, H, N, d = query.shape
    if d < EXPLICIT_MAX_HEAD_DIM and \
            B * H * N * key.shape[-2] <= EXPLICIT_MAX_ELEMENTS:
        return 'explicit'
    return 'sdpa'


def head_mean_attention(query: torch.Tensor,
                        key: torch.Tensor,
                        labels: torch.Tensor,
                        bias: Optional[torch.Tensor] = None,
                        scale: Scale = None,
                        impl: str = 'auto',
                        with_mass: bool = False
                        ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``Ā Y = mean_h softmax(q_h k_h^T s + bias) Y`` in float32.

    Args:
        query (Tensor): ``(B, H, N, d)``, as the attention uses it (after
            qk-norm; any float dtype).
        key (Tensor): ``(B, H, M, d)``.
        labels (Tensor): ``(B, M, S)`` labels of the keys.
        bias (Tensor, optional): additive logits bias broadcastable to
            ``(B, H, N, M)`` (``-inf`` where a mask masks).
        scale (float | Tensor, optional): a float or one per head ``(H,)``;
            default ``d ** -0.5``.
        impl (str): one of :data:`IMPLS`.
        with_mass (bool): also return ``m = (Ā Y).sum(-1)`` ``(B, N, 1)``,
            each query's attention on keys that carry labels.

    Returns:
        tuple: ``Ā Y`` ``(B, N, S)`` float32, and ``m`` or ``None``.
    """
    if impl not in IMPLS:
        raise ValueError(f'impl must be one of {IMPLS}, got {impl!r}.')
    with torch.no_grad(), torch.autocast(query.device.type, enabled=False):
        if impl == 'auto':
            impl = choose_impl(query, key, bias, scale)
        if impl == 'triton':
            if bias is not None or not _float_scale(scale):
                raise ValueError("impl='triton' takes no bias and one float "
                                 'scale.')
            scale = query.shape[-1]**-0.5 if scale is None else scale
            attended = _triton_labels().mean_head_labels(
                query, key, labels, float(scale))
        elif impl == 'explicit':
            attended = _explicit(query, key, labels, bias, scale)
        else:
            attended = _sdpa(query, key, labels, bias, scale)
        mass = attended.sum(-1, keepdim=True) if with_mass else None
    return attended, mass


def mean_probs_attention(probs: torch.Tensor,
                         labels: torch.Tensor) -> torch.Tensor:
    """``Ā Y`` from attention probabilities a block computed itself:
    ``(B, H, N, M)`` (or the head mean ``(B, N, M)``) and ``(B, M, S)`` ->
    ``(B, N, S)`` float32."""
    with torch.no_grad(), torch.autocast(probs.device.type, enabled=False):
        probs = probs.float()
        if probs.dim() == 4:
            probs = probs.mean(1)
        return torch.bmm(probs, labels.float())


def _per_head(scale: torch.Tensor) -> torch.Tensor:
    return scale.float().view(1, -1, 1, 1)


def _explicit(query, key, labels, bias, scale):
    logits = torch.matmul(query.float(), key.float().transpose(-2, -1))
    if scale is None:
        scale = query.shape[-1]**-0.5
    logits = logits * (_per_head(scale) if isinstance(scale, torch.Tensor)
                       else scale)
    if bias is not None:
        logits = logits + bias.float()
    # (B, N, M) @ (B, M, S): a plain bmm, no broadcasting views.
    return torch.bmm(logits.softmax(-1).mean(1), labels.float())


def _sdpa(query, key, labels, bias, scale):
    B, H, N, d = query.shape
    S = labels.shape[-1]
    query = query.float()
    if isinstance(scale, torch.Tensor):
        query, scale = query * _per_head(scale), 1.
    values = labels.float()
    if S < d:
        values = F.pad(values, (0, d - S))
    attended = F.scaled_dot_product_attention(
        query, key.float(), values.unsqueeze(1).expand(-1, H, -1, -1),
        attn_mask=None if bias is None else bias.float(), scale=scale)
    return attended[..., :S].mean(1)
