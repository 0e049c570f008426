"""What every tracer shares: patch-embedding geometry, the drop-path keep
mask, and the attention-function interception.

A tracer runs the backbone's *own* forward. It only swaps, for the duration
of one call, the attention function an attention module calls (an instance
attribute in mmpretrain) for one that also returns ``Ā Y``, and reads the
per-sample keep mask of the module's drop-path. Nothing is re-implemented, so
the tokens are exactly those of a plain forward.
"""
from contextlib import ExitStack, contextmanager
from typing import Callable, List, Optional

import torch
import torch.nn as nn
from mmcv.cnn.bricks.drop import DropPath
from mmengine.logging import MMLogger

from tlalign_mm.core import (
    AlignmentState,
    attention_with_labels,
    flatten_label_map,
    window_mean,
)


def patch_embed_labels(patch_embed: nn.Module,
                       label_map: torch.Tensor) -> torch.Tensor:
    """Labels of the tokens an mmcv ``PatchEmbed`` (or any module with an
    optional ``adaptive_padding`` and a conv ``projection``) makes from
    ``label_map``.

    Args:
        patch_embed (nn.Module): the patch embedding.
        label_map (Tensor): ``(B, S, H, W)`` source weights of its input.

    Returns:
        Tensor: ``(B, h*w, S)``, each token the mean over its window's real
        (non-padded) positions.
    """
    conv = patch_embed.projection
    pre_pad = None
    # mmcv names it ``adaptive_padding``, mmdet ``adap_padding``.
    adaptive = getattr(patch_embed, 'adaptive_padding', None) or getattr(
        patch_embed, 'adap_padding', None)
    if adaptive is not None:
        pad_h, pad_w = adaptive.get_pad_shape(label_map.shape[-2:])
        if adaptive.padding == 'corner':
            pre_pad = (0, pad_w, 0, pad_h)
        else:
            pre_pad = (pad_w // 2, pad_w - pad_w // 2, pad_h // 2,
                       pad_h - pad_h // 2)
    if isinstance(conv.padding, str):
        raise NotImplementedError(
            f'String conv padding {conv.padding!r} in the patch embedding '
            'is not supported by TL-Align; use an integer padding.')
    return flatten_label_map(
        window_mean(label_map, conv.kernel_size, conv.stride, conv.padding,
                    conv.dilation, pre_pad))


@contextmanager
def record_drop_path(drop: nn.Module, sink: List[Optional[torch.Tensor]]):
    """While active, ``drop`` (an mmcv ``DropPath``) appends the per-sample
    keep mask it draws, ``(B,)`` bool, to ``sink``; ``None`` when it is a
    no-op (eval, rate 0, or another kind of module).

    The mask is the one the tokens get: the forward below is mmcv's
    ``drop_path`` verbatim, drawing from the same RNG in the same order, so no
    second mask is drawn.
    """
    if not isinstance(drop, DropPath):
        def forward(x):
            sink.append(None)
            return type(drop).forward(drop, x)
    else:
        def forward(x):
            if drop.drop_prob == 0. or not drop.training:
                sink.append(None)
                return x
            keep_prob = 1 - drop.drop_prob
            shape = (x.shape[0], ) + (1, ) * (x.ndim - 1)
            random_tensor = keep_prob + torch.rand(
                shape, dtype=x.dtype, device=x.device)
            mask = random_tensor.floor()
            sink.append(mask.reshape(-1) > 0)
            return x.div(keep_prob) * mask

    drop.forward = forward
    try:
        yield
    finally:
        del drop.forward


@contextmanager
def intercept_attention_fn(module: nn.Module, attr: str,
                           labels_of: Callable[[], torch.Tensor],
                           sink: List[torch.Tensor]):
    """Swap ``module.<attr>`` (an SDPA-like function) for one that also
    appends ``Ā Y`` to ``sink``; ``labels_of()`` gives the keys' labels."""
    original = getattr(module, attr)
    owned = attr in module.__dict__

    def traced(query, key, value, attn_mask=None, dropout_p=0., **kwargs):
        if (dropout_p > 0 or query.dtype != torch.float32) and \
                not getattr(module, '_tlalign_second_call_logged', False):
            module._tlalign_second_call_logged = True
            MMLogger.get_current_instance().info(
                f'TL-Align: {type(module).__name__} runs with attention '
                f'dropout {dropout_p} / dtype {query.dtype}; its labels come '
                'from a second, dropout-free float32 attention call.')
        out, attended = attention_with_labels(original, query, key, value,
                                              labels_of(), attn_mask,
                                              dropout_p, **kwargs)
        sink.append(attended)
        return out

    setattr(module, attr, traced)
    try:
        yield
    finally:
        if owned:
            setattr(module, attr, original)
        else:
            delattr(module, attr)


@contextmanager
def trace_block(attn: nn.Module, drop: Optional[nn.Module],
                state: AlignmentState, follow_drop_path: bool,
                attn_attr: str = 'scaled_dot_product_attention'):
    """Trace one transformer block whose self-attention is ``attn``.

    When ``attn`` finishes its forward, the block's label step is taken with
    the ``Ā Y`` its attention call produced and, if ``follow_drop_path``, the
    keep mask its drop-path drew.
    """
    attended: List[torch.Tensor] = []
    keeps: List[Optional[torch.Tensor]] = []

    def commit(module, args, output):
        if len(attended) != 1:
            raise RuntimeError(
                f'{type(module).__name__} called its attention function '
                f'{len(attended)} times in one forward; TL-Align expects '
                'exactly one call per block.')
        keep = keeps[-1] if (follow_drop_path and keeps) else None
        state.step(attended.pop(), keep)
        keeps.clear()

    with ExitStack() as stack:
        stack.enter_context(
            intercept_attention_fn(attn, attn_attr, lambda: state.labels,
                                   attended))
        if drop is not None:
            stack.enter_context(record_drop_path(drop, keeps))
        handle = attn.register_forward_hook(commit)
        stack.callback(handle.remove)
        yield


@contextmanager
def capture_output_labels(module: nn.Module, state: AlignmentState):
    """While active, the labels of the tokens entering ``module`` (the norm
    of the stage whose output the head reads) become
    ``state.output_labels``."""
    state.output_labels = None

    def before(mod, args):
        state.output_labels = state.labels

    handle = module.register_forward_pre_hook(before)
    try:
        yield
    finally:
        handle.remove()


def last_output_stage(num_stages: int, out_indices) -> int:
    """The stage whose output is the last of a pyramid's output tuple (the
    one a pooled head reads)."""
    stages = [i for i in range(num_stages) if i in out_indices]
    if not stages:
        raise ValueError(
            f'TL-Align needs the label of what the head classifies, but '
            f'out_indices={out_indices} outputs no stage.')
    return stages[-1]


def pooled_output_labels(backbone: nn.Module, state: AlignmentState,
                         stage: int) -> torch.Tensor:
    """``(B, S)``: the mean over the tokens :func:`capture_output_labels`
    caught, i.e. what global average pooling feeds the head."""
    if state.output_labels is None:
        raise RuntimeError(
            f'{type(backbone).__name__} never finished stage {stage}; '
            'TL-Align has no label for what the head classifies.')
    return state.output_labels.mean(1)
