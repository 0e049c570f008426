"""Key maps, for attention whose keys are not the tokens themselves: how a
block's token labels become its keys' labels (``to_keys``) and ``Ā Y`` (with
``m``) comes back to the tokens (``to_queries``)."""
from typing import NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F

from .token_labels import as_conv_window, label_map_of, window_labels


class Windows(NamedTuple):
    """Shifted-window attention over an ``hw`` token map (Swin's
    ``ShiftWindowMSA``): labels padded bottom/right by ``pads``, rolled by
    ``-shift`` and cut into ``window_size`` windows, in the layout of its
    ``window_partition``; ``Ā Y`` back like ``window_reverse``, the reverse
    roll and the crop. Padded keys carry no label (zeros)."""
    hw: Tuple[int, int]
    window_size: int
    shift: int
    pads: Tuple[int, int]

    @property
    def padded(self) -> bool:
        return any(self.pads)

    def to_keys(self, labels: torch.Tensor) -> torch.Tensor:
        """``(B, H*W, S)`` -> ``(nW*B, ws*ws, S)``."""
        (H, W), ws, (pad_b, pad_r) = self.hw, self.window_size, self.pads
        B, S = labels.shape[0], labels.shape[-1]
        x = labels.view(B, H, W, S)
        if self.padded:
            x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        if self.shift > 0:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        x = x.view(B, x.shape[1] // ws, ws, x.shape[2] // ws, ws, S)
        return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, S)

    def to_queries(self, attended: torch.Tensor,
                   mass: Optional[torch.Tensor]):
        """The inverse of :meth:`to_keys` for ``Ā Y`` (and ``m``)."""
        (H, W), ws, (pad_b, pad_r) = self.hw, self.window_size, self.pads
        if mass is not None:
            attended = torch.cat([attended, mass], -1)
        Hp, Wp, K = H + pad_b, W + pad_r, attended.shape[-1]
        x = attended.view(-1, Hp // ws, Wp // ws, ws, ws, K)
        x = x.permute(0, 1, 3, 2, 4, 5).reshape(-1, Hp, Wp, K)
        if self.shift > 0:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        if self.padded:
            x = x[:, :H, :W, :]
        x = x.reshape(x.shape[0], H * W, K)
        if mass is None:
            return x, None
        return x[..., :-1], x[..., -1:]


class Reduction(NamedTuple):
    """Spatial-reduction attention (PVT): a key's label is the mean label of
    the tokens its ``kernel``/``stride`` window pools over the ``hw`` token
    map (``(1, 1)``: the tokens themselves)."""
    hw: Tuple[int, int]
    kernel: Tuple[int, int]
    stride: Tuple[int, int]
    padded = False

    def to_keys(self, labels: torch.Tensor) -> torch.Tensor:
        if self.stride == (1, 1) and self.kernel == (1, 1):
            return labels
        window = as_conv_window(self.kernel, self.stride)
        return window_labels(window, label_map_of(labels, self.hw))

    def to_queries(self, attended, mass):
        return attended, mass
