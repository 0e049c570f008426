"""The tracing protocol every tracer follows.

A tracer runs the backbone's *own* forward and re-implements nothing, so the
tokens are exactly those of a plain forward. It installs *taps*: public
torch hooks, plus, for attention modules that call an attention function
held as an instance attribute (mmpretrain's ``MultiheadAttention``), a
stand-in for that attribute. Taps belong to one :class:`TraceSession`; they
do nothing unless a traced forward of that backbone is running, so a model
whose taps are installed computes exactly what the plain model computes
outside a traced forward.

What every architecture shares lives here:

- :func:`label_math`: label arithmetic in float32, without gradients, also
  under autocast;
- :class:`BlockTrace`: one block's label step. The attention tap hands it
  ``Ā Y`` (and, with padded keys, the mass ``m``), the drop-path tap the
  per-sample keep decision, read off the drop-path module's own output
  (a dropped sample's branch output is exactly zero), and at the end of the
  block it applies the rule of :mod:`tlalign_mm.core.alignment`;
- token-making modules inside the backbone (patch merging, SPT pooling, a
  pyramid stage's patch embedding) replace the labels by their rule
  (:mod:`.token_rules`), and pyramids capture the labels the head pools;
- :class:`Tracer`: what an architecture family supplies: its blocks, how a
  block's attention yields ``Ā Y`` (:meth:`Tracer.tap_attention`), and
  what the head reads (:meth:`Tracer.readout`).
"""
from contextlib import contextmanager
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from torch.utils.hooks import RemovableHandle

from tlalign_mm.core import AlignmentState, label_map_of, with_extra_tokens
from tlalign_mm.core.alignment import resolve_align_layers

from .token_rules import input_grid, makes_tokens, token_labels


@contextmanager
def label_math(device_type: str):
    """Label arithmetic: float32 and no gradient, also inside an autocast
    region (convolutions and matmuls would otherwise run in bf16/fp16 and
    round the labels)."""
    with torch.no_grad(), torch.autocast(device_type, enabled=False):
        yield


class TraceSession:
    """The traced forward a backbone's taps serve: its
    :class:`AlignmentState` while one runs, ``None`` otherwise.

    Taps are methods of this object or of objects that hold it, never
    closures, so ``copy.deepcopy`` of a model (EMA) gives the copy taps of
    its own.
    """

    def __init__(self, tracer: 'Tracer', num_layers: int,
                 align_layers: Union[str, Sequence[int]] = 'all',
                 residual_norm: bool = True, follow_drop_path: bool = True):
        self.tracer = tracer
        self.num_layers = num_layers
        # The options of traced forwards that do not give their own.
        resolve_align_layers(align_layers, num_layers)  # fail early
        self.align_layers = align_layers
        self.residual_norm = residual_norm
        self.follow_drop_path = follow_drop_path
        self.state: Optional[AlignmentState] = None

    def replace_labels_hook(self, module: nn.Module, args, kwargs) -> None:
        """Forward pre-hook of a token-making module inside the backbone:
        the labels become those of the tokens it makes (its rule in
        :mod:`.token_rules`)."""
        state = self.state
        if state is None:
            return
        hw = input_grid(args, kwargs)
        if state.labels.shape[1] != hw[0] * hw[1]:
            raise RuntimeError(
                f'{type(module).__name__} got a {hw[0]}x{hw[1]} map but the '
                f'labels hold {state.labels.shape[1]} tokens.')
        with label_math(state.labels.device.type):
            state.replace(token_labels(module,
                                       label_map_of(state.labels, hw)))

    def capture_output_hook(self, module: nn.Module, args) -> None:
        """Forward pre-hook of the module that receives the tokens the head
        pools: their labels are the readout's."""
        if self.state is not None:
            self.state.output_labels = self.state.labels


class TracedBlock(NamedTuple):
    """One transformer block, as a tracer sees it.

    Attributes:
        block (nn.Module): the whole block; its output is the block's tokens,
            and the label step is taken when it returns (LayerNorm and the
            MLP leave labels alone, so after the MLP is as good as after the
            attention branch).
        attention (nn.Module): the module :meth:`Tracer.tap_attention`
            reads ``Ā Y`` from.
        drop_path (nn.Module, optional): the attention branch's drop-path.
    """
    block: nn.Module
    attention: nn.Module
    drop_path: Optional[nn.Module]


class BlockTrace:
    """One block's label step in the traced forward.

    Taps call :meth:`attend` once per attention call (with ``None`` when the
    block does not align), the drop-path tap records the keep decision, and
    :meth:`commit` (when the block returns) applies the rule.
    """

    def __init__(self, session: TraceSession, name: str):
        self.session = session
        self.name = name
        self._clear()

    def _clear(self):
        self.attended: Optional[torch.Tensor] = None
        self.mass: Optional[torch.Tensor] = None
        self.keep: Optional[torch.Tensor] = None
        self.calls = 0

    @property
    def state(self) -> Optional[AlignmentState]:
        return self.session.state

    def attend(self, attended: Optional[torch.Tensor],
               mass: Optional[torch.Tensor] = None) -> None:
        """``Ā Y`` ``(B, N, S)`` float32 of this block's attention call
        (and the mass ``m`` ``(B, N, 1)`` of keys with labels, where some
        keys are padding)."""
        self.calls += 1
        self.attended, self.mass = attended, mass

    def drop_path_hook(self, module: nn.Module, args, output) -> None:
        """Forward hook of the attention branch's drop-path: a sample is
        dropped exactly when the module's output for it is all zeros (it
        multiplies the whole branch by 0 or by ``1 / keep_prob``). Read off
        the real call, so no second mask is drawn and the module's own RNG
        use, whatever it is, is followed."""
        state = self.session.state
        if state is not None and state.follow_drop_path and module.training:
            # One reduction, shaped (B, 1, 1) like the labels' batch axis
            # (any() is not differentiable: no graph, nothing to detach).
            keep = output.any(dim=tuple(range(1, output.dim())),
                              keepdim=True)
            self.keep = keep if keep.dim() == 3 else keep.view(-1, 1, 1)

    def commit_hook(self, module: nn.Module, args, output) -> None:
        """Forward hook of the block: take its label step."""
        state = self.session.state
        if state is None:
            return
        if self.calls != 1:
            calls = self.calls
            self._clear()
            raise RuntimeError(
                f'{self.name} ({type(module).__name__}) made {calls} '
                'traced attention calls in one forward; TL-Align expects '
                'exactly one per block, so its labels would be wrong. (Was '
                'an attention module or function replaced after TL-Align '
                'installed its taps?)')
        attended, mass, keep = self.attended, self.mass, self.keep
        self._clear()
        with label_math(state.labels.device.type):
            state.step(attended, keep, mass)


class Tracer:
    """What an architecture family supplies to the tracing protocol.

    Subclasses set :attr:`attention_types` (dispatch is by the attention
    modules a backbone contains) and implement :meth:`blocks`,
    :meth:`tap_attention` and, where the defaults do not fit,
    :meth:`patch_embed`, :meth:`num_extra_tokens`, :meth:`output_module`
    and :meth:`readout`.
    """

    #: Import paths (``'package.module.Class'``) of the attention modules
    #: this tracer reads, subclasses included.
    attention_types: Sequence[str] = ()

    # -- what the backbone is made of ------------------------------------
    def supports(self, backbone: nn.Module) -> bool:
        return any(self.is_attention(m) for m in backbone.modules())

    def is_attention(self, module: nn.Module) -> bool:
        return any(f'{c.__module__}.{c.__qualname__}' in self.attention_types
                   for c in type(module).__mro__)

    def check(self, backbone: nn.Module) -> None:
        """Raise a clear error if ``backbone`` is not built the way this
        tracer follows (called when tracing is installed)."""

    def blocks(self, backbone: nn.Module) -> List[TracedBlock]:
        raise NotImplementedError

    def num_layers(self, backbone: nn.Module) -> int:
        return len(self.blocks(backbone))

    def patch_embed(self, backbone: nn.Module) -> nn.Module:
        """The module that makes the first tokens from the image."""
        embed = getattr(backbone, 'patch_embed', None)
        if embed is None:
            raise NotImplementedError(
                f'{type(backbone).__name__} has no patch_embed; its tracer '
                'must say which module makes the first tokens.')
        return embed

    def patch_size(self, backbone: nn.Module) -> Optional[Tuple[int, int]]:
        """``(ph, pw)`` in pixels of the patch embedding: its conv's stride
        (mmcv, mmdet, timm ``PatchEmbed``), or its ``patch_size`` (SPT);
        ``None`` if it is neither."""
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
        """Token-making modules inside the forward after the patch
        embedding (patch merging, pooling, later stages' embeddings): every
        module with a label rule other than the patch embedding, outermost
        only."""
        embed = self.patch_embed(backbone)
        inside = set()
        steps = []
        for module in backbone.modules():
            if module is embed or id(module) in inside:
                inside.update(id(m) for m in module.modules())
                continue
            if makes_tokens(module):
                steps.append(module)
                inside.update(id(m) for m in module.modules())
        return steps

    def output_module(self, backbone: nn.Module) -> Optional[nn.Module]:
        """A module whose input is the token map the head reads, when that
        is not the last block's output (pyramids); ``None`` otherwise."""
        return None

    # -- labels -------------------------------------------------------------
    def initial_labels(self, backbone: nn.Module, pixel_weights: torch.Tensor,
                       cls_weights: torch.Tensor) -> torch.Tensor:
        """``(B, N, S)``: the patch tokens' labels by their module's rule,
        after ``cls_weights`` for the extra tokens."""
        patches = token_labels(self.patch_embed(backbone), pixel_weights)
        return with_extra_tokens(patches, cls_weights,
                                 self.num_extra_tokens(backbone))

    def tap_attention(self, block: TracedBlock,
                      trace: BlockTrace) -> List[Callable[[], None]]:
        """Install what hands ``trace`` this block's ``Ā Y``; return the
        callables that remove it."""
        raise NotImplementedError

    def readout(self, backbone: nn.Module,
                tokens: torch.Tensor) -> torch.Tensor:
        """``(B, N, K)`` -> ``(B, K)``: what the head classifies from, for
        token labels and features alike. Default: the mean token (global
        average pooling)."""
        return tokens.mean(1)


# -- installing the taps ---------------------------------------------------
_SESSION_ATTR = '_tlalign_session'


def install(backbone: nn.Module,
            tracer: Tracer,
            align_layers: Union[str, Sequence[int]] = 'all',
            residual_norm: bool = True,
            follow_drop_path: bool = True) -> Callable[[], None]:
    """Install ``tracer``'s taps on ``backbone``, with the alignment options
    its traced forwards use unless they give their own; return a function
    that removes them. Outside a traced forward the taps do nothing.

    Raises:
        NotImplementedError: ``backbone`` is not built the way the tracer
            follows.
        ValueError: ``align_layers`` names blocks the backbone lacks.
    """
    if installed_session(backbone) is not None:
        raise RuntimeError(
            f'TL-Align tracing is already installed on '
            f'{type(backbone).__name__}.')
    tracer.check(backbone)
    blocks = tracer.blocks(backbone)
    session = TraceSession(tracer, len(blocks), align_layers, residual_norm,
                           follow_drop_path)
    removers: List[Callable[[], None]] = []

    def keep(handle: RemovableHandle):
        removers.append(handle.remove)

    for i, block in enumerate(blocks):
        trace = BlockTrace(session, f'block {i}')
        removers.extend(tracer.tap_attention(block, trace))
        if block.drop_path is not None and not isinstance(
                block.drop_path, nn.Identity):
            keep(block.drop_path.register_forward_hook(trace.drop_path_hook))
        keep(block.block.register_forward_hook(trace.commit_hook))
    for module in tracer.token_steps(backbone):
        keep(module.register_forward_pre_hook(session.replace_labels_hook,
                                              with_kwargs=True))
    output = tracer.output_module(backbone)
    if output is not None:
        keep(output.register_forward_pre_hook(session.capture_output_hook))
    setattr(backbone, _SESSION_ATTR, session)

    def remove():
        for remover in reversed(removers):
            remover()
        if installed_session(backbone) is session:
            delattr(backbone, _SESSION_ATTR)

    return remove


def installed_session(backbone: nn.Module) -> Optional[TraceSession]:
    """The session of taps installed on ``backbone``, if any."""
    return getattr(backbone, _SESSION_ATTR, None)


def begin_trace(backbone: nn.Module, tracer: Tracer,
                state: AlignmentState) -> Callable[[], None]:
    """From now until the returned function is called, ``backbone``'s
    forward moves ``state``'s labels. Uses the taps installed on it (e.g. by
    ``TLAlignBackbone``), or installs them until then.

    A function pair rather than a context manager: ``torch.compile`` traces
    through plain calls and ``try``/``finally`` (see
    :func:`tlalign_mm.models.traced_forward`), not through a generator's
    ``yield`` inside ``try``.
    """
    remove = None
    session = installed_session(backbone)
    if session is None:
        remove = install(backbone, tracer)
        session = installed_session(backbone)
    if session.state is not None:
        raise RuntimeError('A traced forward of this backbone is already '
                           'running; traced forwards do not nest.')
    session.state = state

    def end():
        session.state = None
        if remove is not None:
            remove()

    return end


def last_output_stage(num_stages: int, out_indices) -> int:
    """The stage whose output is the last of a pyramid's output tuple (the
    one a pooled head reads)."""
    stages = [i for i in range(num_stages) if i in out_indices]
    if not stages:
        raise ValueError(
            f'TL-Align needs the label of what the head classifies, but '
            f'out_indices={out_indices} outputs no stage.')
    return stages[-1]
