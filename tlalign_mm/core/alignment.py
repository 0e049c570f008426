"""The layer-wise alignment rule, and the loop that applies it to a
recorded forward (:func:`align`).

The rule, in one place (TL-Align, Eq. 5, and the two deviations that are
ours):

- **Paper.** A block's attention moves labels like it moves tokens, and the
  block's residual connection averages: ``Y <- (Y + Ā Y) / 2``, with ``Ā``
  the block's attention averaged over heads. LayerNorm and the MLP leave
  labels alone. ``residual_norm=False`` is the paper's ablation
  ``Y <- Ā Y`` (Table 8).
- **Ours: keys that are padding.** Swin pads its token map to a multiple of
  the window; padded positions are keys that carry no label. A real token's
  ``Ā Y`` then holds only the mass ``m = Ā 1_real <= 1`` its attention puts
  on real tokens, and the paper's update would sum to ``(1 + m) / 2``. We
  renormalise it to sum 1: ``Y <- (Y + Ā Y) / (1 + m)`` (``Ā Y / m``
  without the residual average). Without padding ``m = 1`` and this is the
  paper's rule.
- **Ours: drop-path.** A sample whose attention branch drop-path removed in
  a block keeps its labels there (for it, the block's attention is ``I``).
  The original code ignores drop-path (``keep=None``).
- **Ours: convolutions between attention blocks** (docs/design.md,
  "Between attention blocks"). A residual branch ``x + f(x)`` whose ``f``
  mixes neighbouring tokens by a convolution (PVT v2's ConvFFN) moves
  labels by the same update with ``W``, the mean over each position's
  window, in place of ``Ā``; a token step (merging, a strided pool, an
  embedding) gives each new token its window's mean label.
- **Ours: queries that are not the tokens** (:mod:`.queries`). Where a
  block's output tokens are its pooled queries (MViTv2, LeViT's
  subsampling), ``Y' = (P_s Y + M Y) / 2``: the residual's own tokens'
  labels ``P_s Y`` (their windows' mean), ``M Y = Ā (P_k Y)`` (and, with
  MViTv2's residual pooling, ``(P_q Y + Ā (P_k Y)) / 2``); ``Y' = M Y``
  for a block with no residual. Where only some tokens query (class
  attention), they move by the paper's rule and the others pass.
"""
from contextlib import contextmanager
from typing import List, Optional, Tuple

import torch

from .options import AlignOptions, resolve_align_layers
from .queries import QUERY_MAPS
from .records import Recorded
from .token_labels import readout, with_extra_tokens


def residual_align(labels: torch.Tensor,
                   attended: torch.Tensor,
                   residual_norm: bool = True,
                   keep: Optional[torch.Tensor] = None,
                   mass: Optional[torch.Tensor] = None) -> torch.Tensor:
    """One block's label update (see the module docstring).

    Args:
        labels (Tensor): ``(B, N, S)`` labels entering the block.
        attended (Tensor): ``(B, N, S)`` ``Ā Y``: head-averaged attention
            applied to the labels of the keys.
        residual_norm (bool): ``(Y + Ā Y) / 2`` (default, the paper's) or,
            ``False``, ``Ā Y`` (the paper's Table 8 ablation).
        keep (Tensor, optional): ``(B,)`` or ``(B, 1, 1)`` bool, ``False``
            for samples whose attention branch drop-path removed: they keep
            their labels.
        mass (Tensor, optional): ``(B, N, 1)`` ``m``, each token's attention
            on keys that carry labels, when some keys are padding. ``None``
            means ``m = 1`` (no padding).

    Returns:
        Tensor: ``(B, N, S)``, summing to 1 over ``S`` where ``labels`` do.
    """
    if mass is not None:
        return _residual_align_padded(labels, attended, residual_norm, keep,
                                      mass)
    # lerp(Y, ĀY, w) = Y + w (ĀY - Y): one fused operation for both the
    # paper's average (w = 1/2) and its ablation (w = 1, i.e. ĀY).
    new = torch.lerp(labels, attended, 0.5 if residual_norm else 1.0)
    if keep is not None:
        new = torch.where(_batch_axis(keep), new, labels)
    return new


def _batch_axis(keep: torch.Tensor) -> torch.Tensor:
    return keep if keep.dim() == 3 else keep.view(-1, 1, 1)


def _residual_align_padded(labels, attended, residual_norm, keep, mass):
    if residual_norm:
        new = (labels + attended) / (1 + mass)
    else:
        # m > 0 always (a real token attends to itself), unless the softmax
        # underflowed to 0 on every real key: then the token keeps its label.
        new = torch.where(mass > 0, attended / mass.clamp_min(1e-30), labels)
    if keep is not None:
        new = torch.where(_batch_axis(keep), new, labels)
    return new


@contextmanager
def label_math(device_type: str):
    """Label arithmetic: float32 and no gradient, also inside an autocast
    region (convolutions and matmuls would otherwise run in bf16/fp16 and
    round the labels)."""
    with torch.no_grad(), torch.autocast(device_type, enabled=False):
        yield


def align(recorded: Recorded,
          pixel_weights: torch.Tensor,
          area_share: Optional[torch.Tensor] = None,
          options: AlignOptions = AlignOptions(),
          keep_history: bool = False
          ) -> Tuple[torch.Tensor, List[torch.Tensor]]:
    """The label of what the head reads, from a recorded forward (TL-Align,
    Eq. 5): the initial labels, then ``Y <- (Y + Ā Y) / 2`` per block with
    the token steps in between, up to the head's block and readout, in one
    float32, no-grad context.

    Args:
        recorded (Recorded): what the forward recorded, one slot per block.
        pixel_weights (Tensor): ``(B, S, H, W)`` each pixel's share of
            each source.
        area_share (Tensor, optional): ``(B, S)``, the extra tokens'
            initial label; default each source's pixel share.
        options (AlignOptions): the rule's options, and ``impl``, the path
            of :func:`.head_mean_attention`.
        keep_history (bool): also return the labels before the first block
            and after every block.

    Returns:
        tuple: ``(B, S)``, the label of what the head reads (the
        ``recorded.readout`` of the tokens after ``recorded.head_after``),
        and the ``(B, N_l, S)`` history (empty unless ``keep_history``); a
        RuntimeError where a slot misses a part its hooks record.
    """
    slots, head_after = recorded.slots, recorded.head_after
    num_blocks = len(slots) - 1
    aligned = resolve_align_layers(options.align_layers, num_blocks)
    with label_math(pixel_weights.device.type):
        pixel_weights = pixel_weights.detach().float()
        if area_share is None:
            area_share = pixel_weights.mean((2, 3))
        area_share, join = area_share.detach().float(), recorded.extra_from
        labels = recorded.embed(pixel_weights)
        if not join:
            labels = with_extra_tokens(labels, area_share,
                                       recorded.extra_tokens)
        history = [labels] if keep_history else []
        head = labels if head_after is None else None
        for i, slot in enumerate(slots):
            missing = slot.missing()
            if missing:
                raise RuntimeError(
                    f'Block {i} recorded no {" or ".join(missing)}: the '
                    "forward did not take the path the backbone's "
                    'description follows (was a module replaced after the '
                    'recording hooks were installed?).')
            moves = aligned is None or i in aligned
            before, after = slot.split_steps() if slot.steps else ((), ())
            if head_after == (i - 1, False):
                head = labels
            labels = _steps(before, labels, options, moves)
            if head_after == (i - 1, True):
                head = labels
            if join and i == join:  # (T2T-ViT's, XCiT's class token)
                labels = with_extra_tokens(labels, area_share,
                                           recorded.extra_tokens)
            if i == num_blocks:
                break
            if slot.probs is not None or slot.q is not None:
                # (a block may attend over no tokens: XCiT's XCA blocks)
                labels = _block(slot, labels, options, moves)
            labels = _steps(after, labels, options, moves)
            if keep_history:
                history.append(labels)
    return readout(labels if head_after is None else head,
                   recorded.readout), history


def _steps(steps, labels, options: AlignOptions, moves: bool):
    """Token steps: a token-making one gives its tokens' labels; a residual
    branch (a convolution) moves them like an attention branch, ``Y <- (Y +
    W Y) / 2`` with ``W`` its windows' mean, in a block that aligns
    (``moves``)."""
    for step in steps:
        if not step.residual:
            labels = step.labels(labels)
        elif moves:
            labels = residual_align(
                labels, step.labels(labels), options.residual_norm,
                step.keep if options.follow_drop_path else None)
    return labels


def _block(slot, labels, options: AlignOptions, moves: bool):
    """One block: its key map, ``Ā Y``, and :func:`residual_align`, in a
    block that aligns (``moves``)."""
    key_map, keys, padded = slot.key_map, labels, False
    if isinstance(key_map, QUERY_MAPS):
        return _query_block(slot, labels, options, moves)
    if not moves:
        return labels
    if key_map is not None:
        keys, padded = key_map.to_keys(labels), key_map.padded
    attended, mass = slot.attend(keys, padded, options.impl)
    if key_map is not None:
        attended, mass = key_map.to_queries(attended, mass)
    return residual_align(labels, attended, options.residual_norm,
                          slot.keep if options.follow_drop_path else None,
                          mass)


def _query_block(slot, labels, options: AlignOptions, moves: bool):
    """A block whose queries are not its tokens (:mod:`.queries`): ``Y' =
    (O Y + M Y) / 2``, ``O Y`` the labels of the tokens its queries become
    (the residual's pool, or the querying subset), ``M Y = Ā (P_k Y)``, or
    ``(P_q Y + Ā (P_k Y)) / 2`` where the attention adds its pooled queries;
    ``Y' = M Y`` without a residual or the residual average. A block that
    does not align, and a sample its drop-path dropped: ``O Y``."""
    queries = slot.key_map
    own = queries.own(labels)
    if moves:
        attended, _ = slot.attend(queries.to_keys(labels), False,
                                  options.impl)
        pooled = queries.pooled_queries(labels)
        if pooled is not None:  # a residual connection inside the branch
            attended = torch.lerp(pooled, attended, 0.5)
        own = residual_align(
            own, attended, options.residual_norm,
            slot.keep if options.follow_drop_path else None) if \
            queries.residual else attended
    return queries.to_tokens(labels, own)
