"""The kinds of tap, and the :class:`Recording` that puts them on a
backbone (timm's ``FeatureHooks`` pattern).

A tap is a forward hook (or pre-hook) on one module of one block that copies
what the backbone's own forward computes into that block's
:class:`~tlalign_mm.core.Slot`. The kinds form a closed set (:data:`TAPS`);
a family's description (:mod:`.families`) says which module of which block
gets which kind. Taps hold no labels and change no module; outside a
recorded call they return at once. They are installed once, not per call:
``torch.compile`` breaks the graph on every ``register_forward_hook``.
"""
from functools import partial
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from tlalign_mm.core import (
    Pool,
    PooledQueries,
    Recorded,
    Reduction,
    Slot,
    TokenStep,
    Windows,
)

from .families import Description, describe
from .spt_lsa.lsa import LocalitySelfAttention, diagonal_mask
from .token_rules import input_grid, token_rule


def qkv_output(slot, attn, module, args, qkv):
    """mmpretrain ``MultiheadAttention.qkv`` (an ``nn.Linear``): q and k as
    views of its output, at SDPA's default scale; LSA's learned per-head
    ``scale`` and diagonal mask as ``scale`` and ``bias``."""
    B, N = qkv.shape[:2]
    slot.q, slot.k, _ = qkv.detach().reshape(
        B, N, 3, attn.num_heads, attn.head_dims).permute(2, 0, 3, 1, 4)
    if isinstance(attn, LocalitySelfAttention):
        slot.scale = attn.scale.detach()
        if attn.diagonal_masking and N > 1:
            slot.bias = diagonal_mask(N, torch.float32, qkv.device)


def qkv_scaled_output(slot, arg, module, args, qkv):
    """``qkv`` of an mmpretrain ``MultiheadAttention`` that attends at a
    scale of its own, not SDPA's default: ``arg`` is ``(attention, scale)``,
    the scale found when the description was made (T2T-ViT's)."""
    attn, scale = arg
    qkv_output(slot, attn, module, args, qkv)
    slot.scale = scale


def q_norm_output(slot, attn, module, args, q):
    """timm ``Attention.q_norm``: the queries both of its paths use."""
    slot.q, slot.scale = q.detach(), attn.scale


def k_norm_output(slot, arg, module, args, k):
    slot.k = k.detach()


def softmax_output(slot, arg, module, args, probs):
    """An ``nn.Softmax`` whose output is the attention (Swin)."""
    slot.probs = probs.detach()


def attn_drop_input(slot, arg, module, args):
    """The softmax an attention dropout is given (BEiT; Twins' locally
    grouped attention: ``(B, windows, H, N, N)``, its leading axes flattened
    in the order of the :class:`Windows` key map)."""
    slot.probs = args[0].detach().flatten(0, -4)


def mha_weights(slot, arg, mha, args, kwargs, output):
    """``nn.MultiheadAttention``'s head-averaged weights; with attention
    dropout in training those are after dropout, so q and k instead,
    projected from its inputs with its ``in_proj`` weights (the projection
    runs inside ``F.multi_head_attention_forward``, no module to hook)."""
    if not kwargs.get('need_weights', True) or \
            not kwargs.get('average_attn_weights', True):
        raise RuntimeError('TL-Align records nn.MultiheadAttention called '
                           'with need_weights, average_attn_weights True.')
    if not (mha.training and mha.dropout > 0):
        slot.probs = output[1].detach()
        return
    C, H = mha.embed_dim, mha.num_heads
    for part, name in enumerate(('query', 'key')):
        x = kwargs[name] if name in kwargs else args[part]
        rows = slice(part * C, (part + 1) * C)
        bias = None if mha.in_proj_bias is None else mha.in_proj_bias[rows]
        with torch.no_grad():
            y = F.linear(x.detach(), mha.in_proj_weight[rows], bias)
        setattr(slot, name[0], y.unflatten(-1, (H, -1)).permute(1, 2, 0, 3))


def q_linear(slot, attn, module, args, q):
    """A Linear whose output is the queries, ``(B, N, heads * d)`` (Twins'
    ``GlobalSubsampledAttention.q``; ``attn`` gives ``num_heads``), at
    SDPA's default scale."""
    slot.q = q.detach().unflatten(-1, (attn.num_heads, -1)).transpose(1, 2)


def kv_linear(slot, attn, module, args, kv):
    """A Linear whose output is keys then values, ``(B, M, 2 * heads * d)``
    (Twins' ``GlobalSubsampledAttention.kv``): the keys."""
    slot.k = kv.detach().unflatten(-1, (2, attn.num_heads, -1))[:, :, 0] \
        .transpose(1, 2)


def split_qkv_bias(slot, arg, module, args, output):
    """mmpretrain's LeViT-style attention (``LeAttention``: TinyViT;
    LeViT's ``Attention`` and ``AttentionSubsample``): q and k as views of a
    projection's output (``qkv``, ``kv`` or ``q``; ``arg`` is ``(attn,
    parts)``, ``parts`` that projection's per-head pieces, of widths
    ``key_dim`` for q and k, ``d`` for v), at its ``scale``, and with the
    query the attention bias it adds (``attention_biases`` at its index in
    training, gathered from the detached table, the cached ``ab`` in eval,
    as its forward does)."""
    attn, parts = arg
    B, N = output.shape[:2]
    widths = dict(q=attn.key_dim, k=attn.key_dim, v=attn.d)
    for name, t in zip(parts, output.detach().view(
            B, N, attn.num_heads, -1).split([widths[p] for p in parts], 3)):
        if name != 'v':
            setattr(slot, name, t.transpose(1, 2))
    if 'q' in parts:
        slot.scale = attn.scale
        slot.bias = attn.attention_biases.detach()[
            :, attn.attention_bias_idxs] if attn.training else attn.ab


def _hw(args, kwargs) -> Tuple[int, int]:
    hw = args[1] if len(args) > 1 else kwargs['hw_shape']
    return int(hw[0]), int(hw[1])


def window_geometry(slot, arg, msa, args, kwargs, output):
    """Swin's ``ShiftWindowMSA`` call: the :class:`Windows` key map, the
    shift turned off when the map equals the window without
    ``pad_small_map`` (mirrors ``ShiftWindowMSA.forward``)."""
    (H, W), ws = _hw(args, kwargs), msa.window_size
    shift = 0 if min(H, W) == ws and not msa.pad_small_map else \
        msa.shift_size
    slot.key_map = Windows((H, W), ws, shift,
                           ((ws - H % ws) % ws, (ws - W % ws) % ws))


def local_windows(slot, arg, attn, args, kwargs, output):
    """Twins' ``LocallyGroupedSelfAttention`` call: unshifted windows of its
    ``window_size`` over its ``hw_shape``, padded bottom/right."""
    (H, W), ws = _hw(args, kwargs), attn.window_size
    slot.key_map = Windows((H, W), ws, 0,
                           ((ws - H % ws) % ws, (ws - W % ws) % ws))


def fixed_key_map(slot, key_map, module, args, output):
    """A key map fixed when the backbone was built (TinyViT's windows over
    its one resolution, LeViT's subsampling :class:`PooledQueries`, class
    attention's ``QuerySubset``), recorded when ``module`` runs."""
    slot.key_map = key_map


def spatial_reduction(slot, arg, sra, args, kwargs, output):
    """PVT's ``SpatialReductionAttention`` call: the :class:`Reduction`
    key map of its ``sr`` conv (none when ``sr_ratio`` is 1)."""
    sr = sra.sr if sra.sr_ratio > 1 else nn.Identity()
    slot.key_map = Reduction(_hw(args, kwargs),
                             tuple(getattr(sr, 'kernel_size', (1, 1))),
                             tuple(getattr(sr, 'stride', (1, 1))))


def drop_path_keep(slot, arg, module, args, output):
    """A sample is dropped exactly when the drop-path's output for it is
    zeros (it scales the branch by 0 or ``1 / keep_prob``): read off the
    real call, any RNG; the first token's row decides. A drop-path called
    on both branches (BEiT) keeps its first call, the attention branch's."""
    if module.training and slot.keep is None:
        slot.keep = output[:, :1].any(dim=(1, 2), keepdim=True) \
            if output.dim() == 3 else output.flatten(1).any(1).view(-1, 1, 1)


def token_step(slot, rule, module, args, kwargs):
    """A token-making module's call: its input grid, for its rule."""
    slot.steps.append(TokenStep(input_grid(args, kwargs), rule,
                                type(module).__name__))


def residual_branch(slot, rule, module, args, kwargs):
    """A residual branch's call (PVT v2's ``MixFFN``): its input grid, for
    the rule of its convolutions' windows."""
    slot.steps.append(TokenStep(input_grid(args, kwargs), rule,
                                type(module).__name__, residual=True))


def branch_keep(slot, arg, module, args, output):
    """The drop-path of the residual branch that last ran (its keep, read
    as :func:`drop_path_keep` reads the attention's): its first call after
    the branch (XCiT calls one drop-path on its block's three branches; a
    call before any branch ran is not a branch's)."""
    if not slot.steps:
        return
    step = slot.steps[-1]
    if module.training and step.keep is None:
        keep = output[:, :1].any(dim=(1, 2), keepdim=True) \
            if output.dim() == 3 else output.flatten(1).any(1).view(-1, 1, 1)
        slot.steps[-1] = step._replace(keep=keep)


def mvit_pooling(slot, block, msa, args, kwargs, output):
    """MViTv2's ``MultiScaleAttention`` call (mmpretrain 1.2.0,
    ``backbones/mvit.py``): the :class:`PooledQueries` of its input map
    ``in_size`` (output tokens made by ``block.pool_skip``, a max pool, or
    none; keys and values by ``pool_v``'s windows; ``residual_pooling`` adds
    ``pool_q``'s queries), and its decomposed relative position bias
    folded into the q and k its ``norm_q``/``norm_k`` taps recorded."""
    hw = args[1] if len(args) > 1 else kwargs['in_size']
    hw, skip = (int(hw[0]), int(hw[1])), block.pool_skip
    slot.key_map = PooledQueries(
        hw, None if skip is None else Pool.of(skip), True,
        Pool.of(msa.pool_v),
        Pool.of(msa.pool_q) if msa.residual_pooling else None)
    if msa.rel_pos_spatial:
        slot.q, slot.k, slot.scale = fold_decomposed_rel_pos(
            msa, slot.q, slot.k, tuple(output[1]),
            Pool.of(msa.pool_k).out_hw(hw))


def fold_decomposed_rel_pos(msa, q, k, q_hw, k_hw):
    """MViTv2's logits ``s q_i.k_j + q_i.Rh[a_i, c_j] + q_i.Rw[b_i, d_j]``
    (mmpretrain's ``add_decomposed_rel_pos``; query ``i`` at ``(a, b)`` of
    ``q_hw``, key ``j`` at ``(c, d)`` of ``k_hw``) as one product ``q'.k'``
    of ``q' = [s q, q.Rh[a], q.Rw[b]]`` and ``k' = [k, onehot(c),
    onehot(d)]``, float32: every path of ``head_mean_attention`` takes it,
    with no ``(N, M)`` bias. Returns ``q'``, ``k'`` and the scale, 1."""
    from mmpretrain.models.backbones.mvit import resize_decomposed_rel_pos
    with torch.no_grad(), torch.autocast(q.device.type, enabled=False):
        B, H, N, d = q.shape
        q = q.float()
        (qh, qw), (kh, kw) = q_hw, k_hw
        a, b = torch.meshgrid(torch.arange(qh, device=q.device),
                              torch.arange(qw, device=q.device),
                              indexing='ij')
        Rh = resize_decomposed_rel_pos(msa.rel_pos_h.detach().float(), qh,
                                       kh)[a.flatten()]  # (N, kh, d)
        Rw = resize_decomposed_rel_pos(msa.rel_pos_w.detach().float(), qw,
                                       kw)[b.flatten()]
        rel = [torch.einsum('bhnc,nkc->bhnk', q, R) for R in (Rh, Rw)]
        rows = torch.arange(kh, device=q.device).repeat_interleave(kw)
        cols = torch.arange(kw, device=q.device).repeat(kh)
        onehot = torch.cat([F.one_hot(rows, kh), F.one_hot(cols, kw)], 1)
        k = torch.cat([k.float(), onehot.float().expand(B, H, -1, -1)], -1)
        return torch.cat([q * msa.scale, *rel], -1), k, 1.0


#: kind: (function, hook, the slot part it records)
TAPS = {
    'qkv': (qkv_output, 'forward', 'attention'),
    'qkv_scaled': (qkv_scaled_output, 'forward', 'attention'),
    'q_norm': (q_norm_output, 'forward', 'attention'),
    'k_norm': (k_norm_output, 'forward', 'attention'),
    'softmax': (softmax_output, 'forward', 'attention'),
    'attn_drop_input': (attn_drop_input, 'pre', 'attention'),
    'mha_weights': (mha_weights, 'forward_kw', 'attention'),
    'windows': (window_geometry, 'forward_kw', 'key_map'),
    'reduction': (spatial_reduction, 'forward_kw', 'key_map'),
    'keep': (drop_path_keep, 'forward', None),
    'step': (token_step, 'pre_kw', 'step'),
    'branch': (residual_branch, 'pre_kw', 'step'),
    'branch_keep': (branch_keep, 'forward', None),
    'q_linear': (q_linear, 'forward', 'attention'),
    'kv_linear': (kv_linear, 'forward', 'attention'),
    'split_qkv_bias': (split_qkv_bias, 'forward', 'attention'),
    'local_windows': (local_windows, 'forward_kw', 'key_map'),
    'fixed_key_map': (fixed_key_map, 'forward', 'key_map'),
    'pooling': (mvit_pooling, 'forward_kw', 'key_map'),
}


def _fire(recording, block, tap, arg, module, *hook_args):
    slots = recording.slots
    if slots is not None:
        tap(slots[block], arg, module, *hook_args)


def _fire_attention(recording, block, tap, arg, module, *hook_args):
    """:func:`_fire`, and where the first attention record of the block
    falls among its token steps."""
    slots = recording.slots
    if slots is not None:
        slot = slots[block]
        if slot.attention_at is None:
            slot.attention_at = len(slot.steps)
        tap(slot, arg, module, *hook_args)


class Recording:
    """The taps of ``backbone``'s description (default :func:`.describe`'s),
    each bound to its block's slot. ``recording(images) -> (feats,
    Recorded)`` runs the backbone's own forward once, with fresh slots;
    :meth:`remove` takes the taps off."""

    def __init__(self, backbone: nn.Module,
                 description: Optional[Description] = None):
        self.backbone = backbone
        self.description = d = description or describe(backbone)
        expects = [[] for _ in range(len(d.blocks) + 1)]
        self._handles = []
        for block, module, kind, arg in d.taps:
            if kind.endswith('keep') and isinstance(module, (nn.Identity,
                                                             type(None))):
                continue  # a drop-path that drops nothing
            fn, hook, part = TAPS[kind]
            if kind in ('step', 'branch'):
                arg = partial(token_rule(module), module)
            fire = partial(_fire_attention if part == 'attention' else _fire,
                           self, block, fn, arg)
            kw = dict(with_kwargs=True) if hook.endswith('_kw') else {}
            register = module.register_forward_pre_hook if \
                hook.startswith('pre') else module.register_forward_hook
            self._handles.append(register(fire, **kw))
            if part == 'step' or part not in (None, *expects[block]):
                expects[block].append(part)  # (every step, once each)
        self._expects = [tuple(e) for e in expects]
        self._embed = partial(token_rule(d.embed), d.embed)
        self.slots: Optional[list] = None

    def __call__(self, images: torch.Tensor) -> Tuple[object, Recorded]:
        if self.slots is not None:
            raise RuntimeError(f'{type(self.backbone).__name__} is being '
                               'recorded already (in another thread?).')
        self.slots = [Slot(expects) for expects in self._expects]
        try:
            feats = self.backbone(images)
        finally:
            slots, self.slots = self.slots, None
        d = self.description
        return feats, Recorded(slots, self._embed, d.extra_tokens,
                               d.head_after, d.readout, d.extra_from)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
