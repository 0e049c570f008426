"""The layer-wise alignment rule and the state one traced forward carries."""
from typing import Iterable, List, Optional, Union

import torch


def residual_align(labels: torch.Tensor,
                   attended: torch.Tensor,
                   residual_norm: bool = True,
                   keep: Optional[torch.Tensor] = None) -> torch.Tensor:
    """One block's label update, ``Y <- (Y + Ā Y) / 2`` (TL-Align, Eq. 5).

    The average is the block's residual connection, normalised; LayerNorm and
    the MLP (with its residual) leave labels unchanged.

    Args:
        labels (Tensor): ``(B, N, S)`` labels entering the block.
        attended (Tensor): ``(B, N, S)`` ``Ā Y``: head-averaged attention
            applied to the labels (of the keys' tokens).
        residual_norm (bool): ``False`` drops the residual average, giving
            ``Y <- Ā Y`` (the paper's ablation, Table 8).
        keep (Tensor, optional): ``(B,)`` bool. Samples whose attention branch
            drop-path removed in this block keep their labels (``A = I``).

    Returns:
        Tensor: ``(B, N, S)``.
    """
    new = (labels + attended) / 2 if residual_norm else attended
    if keep is not None:
        new = torch.where(keep.view(-1, 1, 1), new, labels)
    return new


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
    """

    def __init__(self,
                 labels: torch.Tensor,
                 align_layers: Union[str, Iterable[int]] = 'all',
                 residual_norm: bool = True,
                 num_layers: Optional[int] = None,
                 keep_history: bool = False):
        self.labels = labels.detach().float()
        self.residual_norm = residual_norm
        self.num_layers = num_layers
        self.layer = 0
        self.history: List[torch.Tensor] = [self.labels] if keep_history \
            else []
        self.keep_history = keep_history
        # The labels of the tokens the head reads, where a tracer must catch
        # them mid-forward (pooled pyramids read a stage's output).
        self.output_labels: Optional[torch.Tensor] = None
        self._aligned = self._resolve(align_layers, num_layers)

    @staticmethod
    def _resolve(align_layers, num_layers):
        if align_layers in (None, 'all'):
            return None
        if align_layers == 'last':
            align_layers = [-1]
        if isinstance(align_layers, str):
            raise ValueError(
                f"align_layers must be 'all', 'last' or a list of block "
                f'indices, got {align_layers!r}.')
        indices = set()
        for i in align_layers:
            if i < 0:
                if num_layers is None:
                    raise ValueError('Negative align_layers need num_layers.')
                i += num_layers
            if num_layers is not None and not 0 <= i < num_layers:
                raise ValueError(f'align_layers index {i} is out of range '
                                 f'for a model with {num_layers} blocks.')
            indices.add(i)
        return indices

    def aligns(self, layer: int) -> bool:
        return self._aligned is None or layer in self._aligned

    def step(self, attended: Optional[torch.Tensor],
             keep: Optional[torch.Tensor] = None) -> None:
        """Finish one block: apply the rule if this block aligns."""
        if attended is not None and self.aligns(self.layer):
            self.labels = residual_align(self.labels, attended.float(),
                                         self.residual_norm, keep)
        self.layer += 1
        if self.keep_history:
            self.history.append(self.labels)

    def replace(self, labels: torch.Tensor) -> None:
        """Labels changed by a step that is not a block (patch merging,
        pooling). The history keeps the per-block labels before it."""
        self.labels = labels
