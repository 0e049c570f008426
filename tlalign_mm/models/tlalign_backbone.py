"""``TLAlignBackbone``: a plain backbone that can also align token labels."""
from typing import Iterable, Optional, Union

import torch
from mmengine.model import BaseModule
from mmpretrain.registry import MODELS

from .traced_forward import TracedOutput, traced_forward
from .tracers import get_tracer

_INNER = 'backbone.'


@MODELS.register_module()
class TLAlignBackbone(BaseModule):
    """Wrap a backbone for Token-Label Alignment.

    ``forward`` is the wrapped backbone's forward, untouched: evaluation and
    inference are bit-identical to the plain backbone. The classifier calls
    :meth:`forward_aligned` in training to get the aligned labels from the
    same forward pass.

    The wrapper is invisible in checkpoints: its state dict holds the wrapped
    backbone's keys without an extra ``backbone.`` level, so a TL-Align
    classifier checkpoint is a plain ``ImageClassifier`` checkpoint (load the
    backbone anywhere with ``prefix='backbone.'``) and plain checkpoints load
    into it.

    Args:
        backbone (dict): config of the backbone to wrap, e.g.
            ``dict(type='VisionTransformer', arch='deit-small')``.
        align_layers (str | list[int]): ``'all'`` (default), ``'last'`` or
            the block indices that align labels (the paper's Table 8).
        residual_norm (bool): average with the residual, ``(Y + ĀY) / 2``
            (default), or not, ``ĀY``.
        follow_drop_path (bool): a sample whose attention branch drop-path
            removed keeps its labels in that block (default). ``False``
            reproduces the original code, which ignores drop-path.
        init_cfg (dict, optional): initialisation config of the wrapper;
            put ``Pretrained`` on the wrapped backbone instead.
    """

    def __init__(self,
                 backbone: dict,
                 align_layers: Union[str, Iterable[int]] = 'all',
                 residual_norm: bool = True,
                 follow_drop_path: bool = True,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        self.backbone = MODELS.build(backbone)
        get_tracer(self.backbone)  # unsupported backbones fail at build time
        self.align_layers = align_layers
        self.residual_norm = residual_norm
        self.follow_drop_path = follow_drop_path
        self._register_state_dict_hook(_drop_inner_prefix)
        self._register_load_state_dict_pre_hook(_add_inner_prefix)

    def forward(self, x: torch.Tensor):
        return self.backbone(x)

    def forward_aligned(self,
                        x: torch.Tensor,
                        pixel_weights: torch.Tensor,
                        cls_weights: Optional[torch.Tensor] = None,
                        keep_history: bool = False) -> TracedOutput:
        """The backbone's forward, plus the aligned ``(B, S)`` label weights
        of what the model classifies from. See
        :func:`tlalign_mm.models.traced_forward.traced_forward`."""
        return traced_forward(self.backbone, x, pixel_weights, cls_weights,
                              self.align_layers, self.residual_norm,
                              self.follow_drop_path, keep_history)

    def get_layer_depth(self, param_name: str, prefix: str = ''):
        """Delegate layer-wise lr decay to the wrapped backbone."""
        if param_name.startswith(prefix + _INNER):
            param_name = prefix + param_name[len(prefix + _INNER):]
        return self.backbone.get_layer_depth(param_name, prefix)


def _rename(mapping, old: str, new: str) -> None:
    """Move every key equal to ``old`` or under ``old + '.'`` to ``new``."""
    for key in list(mapping):
        if key == old or key.startswith(old + '.'):
            target = new + key[len(old):]
            mapping[target.lstrip('.')] = mapping.pop(key)


def _drop_inner_prefix(module, state_dict, prefix, local_metadata):
    """Save the wrapped backbone's tensors, and its version metadata, as if
    it stood where the wrapper stands."""
    _rename(state_dict, prefix + 'backbone', prefix.rstrip('.'))
    metadata = getattr(state_dict, '_metadata', None)
    if metadata is not None:
        metadata.pop(prefix.rstrip('.'), None)
        _rename(metadata, prefix + 'backbone', prefix.rstrip('.'))
    return state_dict


def _add_inner_prefix(state_dict, prefix, local_metadata, strict,
                      missing_keys, unexpected_keys, error_msgs):
    """Load plain backbone keys (and metadata) into the wrapped backbone."""
    inner = prefix + _INNER
    for key in list(state_dict):
        if key.startswith(prefix) and not key.startswith(inner):
            state_dict[inner + key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, '_metadata', None)
    if metadata is not None and prefix.rstrip('.') in metadata:
        for key in list(metadata):
            own = prefix.rstrip('.')
            if (key == own or key.startswith(prefix)) and \
                    not key.startswith(inner):
                metadata[inner + key[len(prefix):] if key != own else
                         inner.rstrip('.')] = metadata[key]
