"""The layer-wise alignment rule, and the loop that applies it to a
recorded forward (:func:`align`).

The rule, in one place (TL-Align, Eq. 5, and the one deviation that is ours):

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
"""
from typing import (
    Iterable,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

import torch

from .records import (
    Attention,
    DropPath,
    HeadInput,
    Keys,
    TokenStep,
    is_key_map,
)


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


def resolve_align_layers(align_layers: Union[str, Iterable[int], None],
                         num_layers: Optional[int] = None
                         ) -> Optional[Set[int]]:
    """The set of block indices that align, ``None`` for all.

    Args:
        align_layers: ``'all'`` (or ``None``), ``'last'`` or a non-empty
            list of block indices (negative ones count from the end).
        num_layers (int, optional): number of blocks; needed for ``'last'``
            and negative indices, and to check the range.

    Raises:
        ValueError: anything else, naming the value and what is accepted.
    """
    if align_layers is None or (isinstance(align_layers, str)
                                and align_layers == 'all'):
        return None
    if isinstance(align_layers, str) and align_layers == 'last':
        align_layers = [-1]
    accepted = ("align_layers must be 'all', 'last' or a non-empty list of "
                'block indices (ints; negative ones count from the end)')
    if isinstance(align_layers, str) or not isinstance(
            align_layers, Iterable):
        raise ValueError(f'{accepted}; got {align_layers!r}.')
    align_layers = list(align_layers)
    if not align_layers:
        raise ValueError(f'{accepted}; got an empty list, which would align '
                         'nothing.')
    indices = set()
    for i in align_layers:
        if isinstance(i, bool) or not isinstance(i, int):
            raise ValueError(f'{accepted}; got {i!r} in {align_layers!r}.')
        if i < 0:
            if num_layers is None:
                raise ValueError('Negative align_layers need num_layers.')
            i += num_layers
        if num_layers is not None and not 0 <= i < num_layers:
            raise ValueError(f'align_layers index {i} is out of range for a '
                             f'model with {num_layers} blocks.')
        indices.add(i)
    return indices


def align(records: Sequence,
          labels: torch.Tensor,
          align_layers: Union[str, Iterable[int], None] = 'all',
          residual_norm: bool = True,
          follow_drop_path: bool = True,
          keep_history: bool = False,
          impl: str = 'auto'
          ) -> Tuple[torch.Tensor, List[torch.Tensor]]:
    """Apply the rule to a recorded forward, block by block (TL-Align,
    Eq. 5): ``Y <- (Y + Ā Y) / 2`` per block, token steps in between.

    Args:
        records (Sequence): what the forward recorded, in order
            (:mod:`tlalign_mm.core.records`).
        labels (Tensor): ``(B, N, S)`` labels of the first tokens.
        align_layers: ``'all'``, ``'last'`` or block indices that align
            (the paper's Table 8); other blocks leave labels alone.
        residual_norm (bool): see :func:`residual_align`.
        follow_drop_path (bool): a sample whose attention branch drop-path
            removed keeps its labels in that block; ``False`` ignores
            drop-path, like the original code.
        keep_history (bool): also return the labels before the first block
            and after every block.
        impl (str): the path of :func:`head_mean_attention`.

    Returns:
        tuple: the ``(B, N_l, S)`` labels of the tokens the head reads (the
        last block's, or those at a :class:`HeadInput`), and the history
        (empty unless ``keep_history``).
    """
    blocks = _blocks(records)
    aligned = resolve_align_layers(align_layers, sum(
        isinstance(b, _Block) for b in blocks))
    with torch.no_grad(), torch.autocast(labels.device.type, enabled=False):
        labels = labels.detach().float()
        history = [labels] if keep_history else []
        head_input, layer = None, 0
        for step in blocks:
            if isinstance(step, TokenStep):
                labels = step.labels(labels)
            elif isinstance(step, HeadInput):
                head_input = labels
            else:
                if aligned is None or layer in aligned:
                    labels = _block(step, labels, residual_norm,
                                    follow_drop_path, impl)
                layer += 1
                if keep_history:
                    history.append(labels)
    return (labels if head_input is None else head_input), history


def _block(step, labels, residual_norm, follow_drop_path, impl):
    """One block: its key map, ``Ā Y``, and :func:`residual_align`."""
    attention, key_map, keep = step
    keys, padded = labels, False
    if key_map is not None:
        keys, padded = key_map.to_keys(labels), key_map.padded
    attended, mass = attention.attend(keys, padded, impl)
    if key_map is not None:
        attended, mass = key_map.to_queries(attended, mass)
    return residual_align(labels, attended, residual_norm,
                          keep if follow_drop_path else None, mass)


class _Block(NamedTuple):
    attention: Attention
    key_map: Optional[object]
    keep: Optional[torch.Tensor]


def _blocks(records: Sequence) -> list:
    """Token steps and head inputs as they are; each :class:`Attention`
    with the records that follow it as one ``(attention, key_map, keep)``
    step."""
    steps: list = []
    for record in records:
        if isinstance(record, (TokenStep, HeadInput)):
            steps.append(record)
        elif isinstance(record, Attention):
            steps.append(_Block(record, None, None))
        else:
            if not steps or not isinstance(steps[-1], _Block):
                raise RuntimeError(f'{type(record).__name__} recorded '
                                   'outside a block.')
            attention, key_map, keep = steps[-1]
            if isinstance(record, Keys):
                attention = attention._replace(k=record.k)
            elif isinstance(record, DropPath):
                keep = record.keep
            elif is_key_map(record):
                key_map = record
            else:
                raise TypeError(f'Not a record: {type(record).__name__}.')
            steps[-1] = _Block(attention, key_map, keep)
    return steps
