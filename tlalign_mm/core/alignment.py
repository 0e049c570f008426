"""The layer-wise alignment rule and the state one traced forward carries.

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
from typing import Iterable, List, Optional, Set, Union

import torch


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


class AlignmentState:
    """Token labels of one forward pass, updated block by block.

    Args:
        labels (Tensor): ``(B, N, S)`` initial labels (float32, no gradient).
        align_layers (str | Iterable[int]): ``'all'``, ``'last'`` or block
            indices (negative indices count from the end) whose attention
            moves the labels. Other blocks leave them alone.
        residual_norm (bool): see :func:`residual_align`.
        num_layers (int, optional): number of blocks, needed to resolve
            ``'last'`` and negative indices.
        keep_history (bool): record the labels after every block.
        follow_drop_path (bool): samples whose attention branch drop-path
            removed keep their labels in that block (see
            :func:`residual_align`); ``False`` ignores drop-path, like the
            original code.
    """

    def __init__(self,
                 labels: torch.Tensor,
                 align_layers: Union[str, Iterable[int]] = 'all',
                 residual_norm: bool = True,
                 num_layers: Optional[int] = None,
                 keep_history: bool = False,
                 follow_drop_path: bool = True):
        self.labels = labels.detach().float()
        self.residual_norm = residual_norm
        self.follow_drop_path = follow_drop_path
        self.num_layers = num_layers
        self.layer = 0
        self.history: List[torch.Tensor] = [self.labels] if keep_history \
            else []
        self.keep_history = keep_history
        # The labels of the tokens the head reads, where a tracer must catch
        # them mid-forward (pooled pyramids read a stage's output).
        self.output_labels: Optional[torch.Tensor] = None
        self._aligned = resolve_align_layers(align_layers, num_layers)

    def aligns(self, layer: Optional[int] = None) -> bool:
        """Whether block ``layer`` (default: the current one) aligns."""
        layer = self.layer if layer is None else layer
        return self._aligned is None or layer in self._aligned

    def step(self, attended: Optional[torch.Tensor],
             keep: Optional[torch.Tensor] = None,
             mass: Optional[torch.Tensor] = None) -> None:
        """Finish one block: apply :func:`residual_align` if it aligns."""
        if not self.follow_drop_path:
            keep = None
        if attended is not None and self.aligns():
            self.labels = residual_align(self.labels, attended,
                                         self.residual_norm, keep, mass)
        self.layer += 1
        if self.keep_history:
            self.history.append(self.labels)

    def replace(self, labels: torch.Tensor) -> None:
        """Labels changed by a step that is not a block (patch merging,
        pooling). The history keeps the per-block labels before it."""
        self.labels = labels
