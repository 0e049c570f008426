"""The recording protocol: what a family supplies, and the hooks.

A :class:`Recording` puts public forward hooks on a backbone that, while a
call of it is open, append what the backbone's own forward computes to that
call's list of records (:mod:`tlalign_mm.core.records`). The hooks hold no
labels and change no module: the forward, tokens and gradients are the
plain ones; outside a call they return at once. They are installed once,
not per call, because ``torch.compile`` breaks the graph on every
``register_forward_hook`` in a compiled step; the open list is the only
thing they write to.
"""
from contextlib import contextmanager
from functools import partial
from typing import List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn as nn
from torch.utils.hooks import RemovableHandle

from tlalign_mm.core import (
    DropPath,
    HeadInput,
    TokenStep,
    with_extra_tokens,
)

from .token_rules import input_grid, token_labels, token_rule


@contextmanager
def label_math(device_type: str):
    """Label arithmetic: float32 and no gradient, also inside an autocast
    region (convolutions and matmuls would otherwise run in bf16/fp16 and
    round the labels)."""
    with torch.no_grad(), torch.autocast(device_type, enabled=False):
        yield


class Block(NamedTuple):
    """A transformer block, its attention module and the attention
    branch's drop-path (or ``None``)."""
    block: nn.Module
    attention: nn.Module
    drop_path: Optional[nn.Module]


class Recorder:
    """What a family of backbones supplies (stateless): its
    :attr:`attention_types` (dispatch is by attention module),
    :meth:`blocks`, :meth:`record_attention`, and where the defaults do not
    fit, the drop-path's hook, patch embedding, extra tokens, head input and
    readout."""

    #: Import paths (``'package.module.Class'``) of the attention modules
    #: this recorder reads, subclasses included.
    attention_types: Sequence[str] = ()

    def supports(self, backbone: nn.Module) -> bool:
        return any(self.is_attention(m) for m in backbone.modules())

    def is_attention(self, module: nn.Module) -> bool:
        return any(f'{c.__module__}.{c.__qualname__}' in self.attention_types
                   for c in type(module).__mro__)

    def check(self, backbone: nn.Module) -> None:
        """A clear error if ``backbone`` is not built as recorded."""
        self.blocks(backbone)

    def blocks(self, backbone: nn.Module) -> List[Block]:
        raise NotImplementedError

    def num_layers(self, backbone: nn.Module) -> int:
        return len(self.blocks(backbone))

    def record_attention(self, block: Block,
                         recording: 'Recording') -> List[RemovableHandle]:
        """Hooks recording ``block``'s attention into ``recording``."""
        raise NotImplementedError

    def record_drop_path(self, block: Block,
                         recording: 'Recording') -> List[RemovableHandle]:
        """Hooks recording the keep decision of ``block``'s attention
        branch drop-path (a forward hook on it, by default)."""
        if block.drop_path is None or isinstance(block.drop_path,
                                                 nn.Identity):
            return []
        return [block.drop_path.register_forward_hook(
            partial(_record_drop_path, recording))]

    def patch_embed(self, backbone: nn.Module) -> nn.Module:
        """The module that makes the first tokens from the image."""
        embed = getattr(backbone, 'patch_embed', None)
        if embed is None:
            raise NotImplementedError(
                f'{type(backbone).__name__} has no patch_embed; its recorder '
                'must say which module makes the first tokens.')
        return embed

    def patch_size(self, backbone: nn.Module) -> Optional[Tuple[int, int]]:
        """``(ph, pw)``: the embedding conv's stride, or its
        ``patch_size`` (SPT); ``None`` if neither."""
        embed = self.patch_embed(backbone)
        conv = getattr(embed, 'projection', None) or getattr(
            embed, 'proj', None)
        if isinstance(conv, nn.Conv2d):
            return tuple(int(s) for s in conv.stride)
        size = getattr(embed, 'patch_size', None)
        if isinstance(size, (tuple, list)) and len(size) == 2 and all(
                isinstance(s, int) for s in size):
            return tuple(size)
        return None

    def input_channels(self, backbone: nn.Module) -> Optional[int]:
        """Channels the patch embedding takes, where it says."""
        embed = self.patch_embed(backbone)
        for conv in (getattr(embed, 'projection', None),
                     getattr(embed, 'proj', None), embed):
            channels = getattr(conv, 'in_channels', None)
            if isinstance(channels, int):
                return channels
        return None

    def num_extra_tokens(self, backbone: nn.Module) -> int:
        """Tokens before the patch tokens (class, distillation)."""
        return 0

    def token_steps(self, backbone: nn.Module) -> List[nn.Module]:
        """Modules with a label rule other than the patch embedding
        (merging, pooling, later stages' embeddings), outermost only."""
        embed = self.patch_embed(backbone)
        inside = set()
        steps = []
        for module in backbone.modules():
            if module is embed or id(module) in inside:
                inside.update(id(m) for m in module.modules())
                continue
            if token_rule(module) is not None:
                steps.append(module)
                inside.update(id(m) for m in module.modules())
        return steps

    def head_input(self, backbone: nn.Module) -> Optional[nn.Module]:
        """A module whose input the head reads (pyramids), or ``None``."""
        return None

    def initial_labels(self, backbone: nn.Module, pixel_weights: torch.Tensor,
                       area_share: torch.Tensor) -> torch.Tensor:
        """``(B, N, S)``: extra tokens at ``area_share``, then patches."""
        patches = token_labels(self.patch_embed(backbone), pixel_weights)
        return with_extra_tokens(patches, area_share,
                                 self.num_extra_tokens(backbone))

    def readout(self, backbone: nn.Module,
                tokens: torch.Tensor) -> torch.Tensor:
        """``(B, N, K)`` -> ``(B, K)`` what the head reads: the mean."""
        return tokens.mean(1)


class Recording:
    """Hooks on ``backbone`` by its family's ``recorder``.
    ``recording(images) -> (feats, records)`` runs the backbone's own
    forward once; :meth:`remove` takes the hooks off."""

    def __init__(self, backbone: nn.Module, recorder: Recorder):
        recorder.check(backbone)
        self.backbone = backbone
        self.recorder = recorder
        self.records: Optional[list] = None
        blocks = recorder.blocks(backbone)
        self.num_blocks = len(blocks)
        handles: List[RemovableHandle] = []
        for block in blocks:
            handles += recorder.record_attention(block, self)
            handles += recorder.record_drop_path(block, self)
        for module in recorder.token_steps(backbone):
            handles.append(module.register_forward_pre_hook(
                partial(_record_token_step, self, token_rule(module)),
                with_kwargs=True))
        head = recorder.head_input(backbone)
        self.reads_head_input = head is not None
        if head is not None:
            handles.append(head.register_forward_pre_hook(
                partial(_record_head_input, self)))
        self._handles = handles

    @property
    def active(self) -> bool:
        return self.records is not None

    def add(self, record) -> None:
        self.records.append(record)

    def __call__(self, images: torch.Tensor) -> Tuple[object, list]:
        if self.records is not None:
            raise RuntimeError(
                f'{type(self.backbone).__name__} is already being recorded '
                '(a recorded forward of it is running in another thread, '
                'or a recorded forward called itself); record one backbone '
                'per call at a time.')
        self.records = []
        try:
            feats = self.backbone(images)
        finally:
            records, self.records = self.records, None
        return feats, records

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


def _record_drop_path(recording: Recording, module: nn.Module, args,
                      output) -> None:
    """A sample is dropped exactly when the drop-path's output for it is
    zeros (it scales the branch by 0 or ``1 / keep_prob``): read off the
    real call, any RNG; the first token's row decides (``1 / N`` of the
    reduction over all tokens)."""
    if recording.records is None or not module.training:
        return
    if output.dim() == 3:
        keep = output[:, :1].any(dim=(1, 2), keepdim=True)
    else:
        keep = output.flatten(1).any(1).view(-1, 1, 1)
    recording.add(DropPath(keep))


def _record_token_step(recording: Recording, rule, module: nn.Module, args,
                       kwargs) -> None:
    if recording.records is not None:
        recording.add(TokenStep(input_grid(args, kwargs),
                                partial(rule, module),
                                type(module).__name__))


def _record_head_input(recording: Recording, module: nn.Module,
                       args) -> None:
    if recording.records is not None:
        recording.add(HeadInput())


def check_head_reads_last_block(backbone: nn.Module, num_blocks: int) -> None:
    """The head must read the last block's tokens, the ones TL-Align
    labels (a token-sequence ViT runs every block whatever ``out_indices``
    says, and its head reads the last output)."""
    out = list(getattr(backbone, 'out_indices', [num_blocks - 1]))
    if num_blocks - 1 not in out:
        raise NotImplementedError(
            f"TL-Align labels the last block's tokens, but "
            f'{type(backbone).__name__} outputs blocks {out} of {num_blocks} '
            f'(out_indices): the head would read block {max(out, default=0)}'
            '. Use out_indices=-1.')


def last_output_stage(num_stages: int, out_indices) -> int:
    """The stage whose output is the last of a pyramid's output tuple (the
    one a pooled head reads)."""
    stages = [i for i in range(num_stages) if i in out_indices]
    if not stages:
        raise ValueError(
            f'TL-Align needs the label of what the head classifies, but '
            f'out_indices={out_indices} outputs no stage.')
    return stages[-1]
