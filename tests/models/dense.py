"""Independent, dense TL-Align references for every family.

Each block's attention is an explicit ``(B, heads, N, M)`` matrix, computed
in float64 from the input its attention module received in the model's own
forward (captured by a hook) and the module's weights; the attention output
that matrix implies is checked against the module's own output, so it is the
model's attention. Labels are ``(B, N, C)`` class vectors moved block by
block by ``Y <- (Y + mean_h(A) Y_keys) / 2``; initial labels, merges, spatial
reductions and SPT's five views are loops (or index arithmetic) over
positions. Swin windows are one dense attention over the whole padded map,
built from coordinates, with the documented padding rule (padded keys carry
zero labels; a real token's update is renormalised to sum 1). Shares no
code with ``tlalign_mm``.

A family's facts are arguments (:class:`Facts`): the attention modules whose
calls are its blocks', how each computes its attention, the initial labels,
the extra tokens and the readout; the defaults read them off ViT, DeiT, BEiT
and timm models. A token-sequence family needs only its facts; one whose
tokens change between blocks walks its blocks in a ``layout`` function, as
:func:`swin_layout` and :func:`pvt_layout` do.
"""
import contextlib
import math
from functools import partial
from typing import Callable, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from mmcv.cnn.bricks.drop import DropPath
from mmdet.models.backbones.pvt import SpatialReductionAttention
from mmpretrain.models.backbones.beit import BEiTAttention
from mmpretrain.models.utils import MultiheadAttention, ShiftWindowMSA
from timm.models.vision_transformer import Attention as TimmAttention

ATTENTIONS = (MultiheadAttention, BEiTAttention, TimmAttention,
              ShiftWindowMSA, SpatialReductionAttention)


class Facts(NamedTuple):
    """What the reference must know of a family (``None``: read off the
    model as for ViT, DeiT, BEiT and timm's ViTs).

    Attributes:
        attentions (tuple): module classes, beyond :data:`ATTENTIONS`, whose
            calls are the blocks' attention.
        attention (Callable): ``(module, args, kwargs) -> (A, out)``: a
            call's ``(B, heads, N, M)`` attention and the module's output
            computed from it by hand (checked against the module's own);
            default :func:`token_attention`.
        embed (Callable): ``(B, H, W, C)`` pixel labels -> ``(B, N, C)``
            initial labels of the tokens the first block attends over
            (:func:`patch_means` of the token size, say); default the patch
            embedding's windows (:func:`embed_labels`).
        prefix (int): extra tokens before them (class, distillation,
            registers); they start at the area label.
        readout (Callable): ``(B, N, C)`` labels after the last block ->
            ``(B, C)``, what the head reads; default by ``out_type`` or
            ``global_pool``.
        layout (Callable): for a family whose tokens change between blocks:
            ``layout(model, calls, pix, step, verify) -> final`` walks its
            blocks, calling ``step(Y, AY)`` once per block (see
            :func:`swin_layout`); default by the model's structure (Swin,
            PVT, else a token sequence with the facts above).
        keeps_before_attention (bool): the drop-paths that run before the
            first attention drop branches that move labels, in the first
            block (TinyViT's MBConv blocks); default they move none
            (HiViT's MLP-only stem).
    """
    attentions: Tuple[type, ...] = ()
    attention: Optional[Callable] = None
    embed: Optional[Callable] = None
    prefix: Optional[int] = None
    readout: Optional[Callable] = None
    layout: Optional[Callable] = None
    keeps_before_attention: bool = False


@contextlib.contextmanager
def attention_calls(model, *more):
    """``(module, args, kwargs, output)`` of every attention call (of the
    known types and ``more``), in order."""
    calls = []
    handles = [m.register_forward_hook(
        lambda m, a, k, o: calls.append((m, a, k, o)), with_kwargs=True)
        for m in model.modules() if isinstance(m, ATTENTIONS + more)]
    yield calls
    for h in handles:  # (an error leaves them: the test has failed)
        h.remove()


def pixel_labels(pixel_weights, targets):
    """(B, S, H, W), (B, S, C) -> (B, H, W, C) class labels of pixels."""
    return torch.einsum('bshw,bsc->bhwc', pixel_weights.double(),
                        targets.double())


def window_means(grid, out_hw, kernel, stride, padding=0):
    """(B, H, W, C) -> (B, h*w, C): each output position's mean label over
    the real positions under its window (padding is no position)."""
    B, _, _, C = grid.shape
    h, w = out_hw
    out = torch.zeros(B, h * w, C, dtype=torch.double)
    for i in range(h):
        for j in range(w):
            r, c = i * stride - padding, j * stride - padding
            cell = grid[:, max(r, 0):max(r + kernel, 0),
                        max(c, 0):max(c + kernel, 0)]
            out[:, i * w + j] = cell.reshape(B, -1, C).mean(1)
    return out


def conv_means(grid, conv):
    """Window means under a (square) convolution's windows, and their grid."""
    (k, _), (s, _), (p, _) = conv.kernel_size, conv.stride, conv.padding
    hw = tuple((n + 2 * p - k) // s + 1 for n in grid.shape[1:3])
    return window_means(grid, hw, k, s, p), hw


def patch_means(grid, patch):
    """Non-overlapping ``patch`` windows, bottom/right padded."""
    H, W = grid.shape[1:3]
    return window_means(grid, (-(-H // patch), -(-W // patch)), patch, patch)


def spt_reads(grid, patch, shift):
    """Every read an SPT token makes of a ``(B, H, W, C)`` map: at patch
    position ``(a, b)`` of token ``(i, j)``, view ``v`` reads ``(i*p + a +
    dy_v, j*p + b + dx_v)``, ``(dy, dx)`` in ``(0, 0), (-s, -s), (-s, s),
    (s, -s), (s, s)``; real only where the patch position is in the map
    (not corner padding) and so is the read (not shift padding), else 0.
    ``(B, h, w, a, b, v, C)`` reads and ``(h, w, a, b, v, 1)`` real."""
    H, W = grid.shape[1:3]
    h, w, p, s = -(-H // patch), -(-W // patch), patch, shift
    r0 = torch.arange(h).view(h, 1, 1, 1, 1) * p + torch.arange(p).view(
        1, 1, p, 1, 1)
    c0 = torch.arange(w).view(1, w, 1, 1, 1) * p + torch.arange(p).view(
        1, 1, 1, p, 1)
    r = r0 + torch.tensor([0, -s, -s, s, s]).view(1, 1, 1, 1, 5)
    c = c0 + torch.tensor([0, -s, s, -s, s]).view(1, 1, 1, 1, 5)
    real = (r0 < H) & (c0 < W) & (r >= 0) & (r < H) & (c >= 0) & (c < W)
    real = real[..., None].double()
    return grid[:, r.clamp(0, H - 1), c.clamp(0, W - 1)].double() * real, real


def spt_labels(grid, patch, shift):
    """(B, H, W, C) -> (B, h*w, C): mean over every real read of the five
    views."""
    reads, real = spt_reads(grid, patch, shift)
    B, h, w = reads.shape[:3]
    return (reads.sum((3, 4, 5)) / real.sum((2, 3, 4))).reshape(B, h * w, -1)


def spt_tokens(spt, x):
    """SPT of a map ``(B, C, H, W)`` from the definition: token feature
    ``(a, b, view, channel)`` is its read (0 where not real), then the
    module's LayerNorm and Linear weights."""
    reads, _ = spt_reads(x.permute(0, 2, 3, 1), spt.patch_size[0],
                         spt.shift_size[0])
    B, h, w = reads.shape[:3]
    return lin(spt.reduction, norm(spt.norm, reads.reshape(B, h * w, -1))), (
        h, w)


def lin(m, x):
    """``m``'s Linear map of ``x`` in float64 (the module stays float32)."""
    bias = None if m.bias is None else m.bias.double()
    return F.linear(x, m.weight.double(), bias)


def norm(m, x):
    """A LayerNorm (or Identity) of ``x`` in float64."""
    return F.layer_norm(x, m.normalized_shape, m.weight.double(),
                        m.bias.double(), m.eps) if isinstance(
        m, torch.nn.LayerNorm) else x


def embed_labels(pe, grid):
    """The labels of the tokens an embedding or a merge (mmcv PatchEmbed,
    timm's, PatchMerging, or SPT, as patch embedding or pooling) makes of a
    label map: means over its windows (SPT: over its five views' reads)."""
    if hasattr(pe, 'shift_size') and pe.label_views != 'centre':
        return spt_labels(grid, pe.patch_size[0], pe.shift_size[0])
    window = getattr(pe, 'projection', None) or getattr(
        pe, 'proj', None) or getattr(pe, 'sampler', None)
    return patch_means(grid, (pe.patch_size[0] if window is None else
                              window.kernel_size[0]))


def _heads(t, B, heads):
    return t.reshape(B, t.shape[1], heads, -1).transpose(1, 2)


def _qkv(m, x, heads):
    """q, k, v ``(B, heads, N, d)`` of ``m.qkv`` (and BEiT's or Swin V2's
    separate q and v biases) of ``x`` in float64."""
    qkv = lin(m.qkv, x)
    if getattr(m, 'q_bias', None) is not None:
        qkv = qkv + torch.cat([m.q_bias, torch.zeros_like(m.v_bias),
                               m.v_bias]).double()
    return [_heads(t, x.shape[0], heads) for t in qkv.chunk(3, -1)]


def _logits(m, q, k):
    """``scale q.k``; LSA: a per-head learned temperature, ``-inf`` on the
    diagonal."""
    scale = getattr(m, 'scale', q.shape[-1]**-0.5)
    if isinstance(scale, torch.Tensor):  # LSA's per-head temperature
        scale = scale.double().view(1, -1, 1, 1)
    logits = (q * scale) @ k.transpose(-2, -1)
    if getattr(m, 'diagonal_masking', False):
        logits = logits.masked_fill(torch.eye(logits.shape[-1],
                                              dtype=torch.bool), float('-inf'))
    return logits


def _attend(logits, v):
    """``A = softmax(logits)`` and ``A v`` with the heads concatenated."""
    A = logits.softmax(-1)
    return A, (A @ v).transpose(1, 2).flatten(2)


def token_attention(module, args, kwargs):
    """ViT-like attention (mmpretrain MHA/LSA, BEiT, timm) of ``args[0]``:
    (A (B, H, N, N), the module's output by hand)."""
    m, x = module, args[0].double()
    N = x.shape[1]
    q, k, v = _qkv(m, x, m.num_heads)
    if hasattr(m, 'q_norm'):  # timm
        q, k = norm(m.q_norm, q), norm(m.k_norm, k)
    logits = _logits(m, q, k)
    table = getattr(m, 'relative_position_bias_table', None)
    if table is not None:  # BEiT's own table and index
        logits = logits + table.double()[m.relative_position_index.view(
            -1)].view(N, N, -1).permute(2, 0, 1)
    if kwargs.get('rel_pos_bias') is not None:  # BEiT's shared bias
        logits = logits + kwargs['rel_pos_bias'].double()
    A, out = _attend(logits, v)
    out = lin(m.proj, norm(getattr(m, 'norm', None), out))
    if hasattr(getattr(m, 'gamma1', None), 'weight'):  # layer scale
        out = out * m.gamma1.weight.double()
    return A, out


def rope_attention(module, args, kwargs):
    """EVA-02's attention with 2D RoPE of ``args[0]``: q, k, v of its
    ``qkv``; every patch token's q and k (not the class token's) turned by
    the rotation of consecutive channel pairs, ``t[2j] cos_2j - t[2j+1]
    sin_2j`` and ``t[2j+1] cos_2j+1 + t[2j] sin_2j+1``, at the angles of
    the module's ``rope`` tables (``freqs_cos``, ``freqs_sin``, one row per
    patch); then ``softmax(scale q k^T)``: (A, the output by hand)."""
    m, x = module, args[0].double()
    q, k, v = _qkv(m, x, m.num_heads)
    if m.rope is not None:
        start = int(m.with_cls_token)
        cos, sin = m.rope.freqs_cos.double(), m.rope.freqs_sin.double()

        def turn(t):
            patches = t[..., start:, :]
            partner = torch.stack([-patches[..., 1::2], patches[..., 0::2]],
                                  -1).flatten(-2)
            return torch.cat([t[..., :start, :],
                              patches * cos + partner * sin], -2)

        q, k = turn(q), turn(k)
    A, out = _attend(_logits(m, q, k), v)
    return A, lin(m.proj, out)


def t2t_attention(module, args, kwargs):
    """mmpretrain's ``MultiheadAttention`` as T2T-ViT builds it (``qk_scale``
    always set) of ``args[0]``: ``softmax(q k^T * head_dims ** 0.5)``:
    mmpretrain 1.2.0's ``scaled_dot_product_attention_pyimpl`` divides by
    the ``scale`` it is bound to, ``head_dims ** -0.5``
    (``models/utils/attention.py`` l. 43, 561-564); with ``v_shortcut``
    (a T2T block, one head) ``v`` is added to the output: (A, the output
    by hand)."""
    m, x = module, args[0].double()
    q, k, v = _qkv(m, x, m.num_heads)
    A, out = _attend(q @ k.transpose(-2, -1) * m.head_dims**0.5, v)
    out = lin(m.proj, out)
    return A, out + v.squeeze(1) if m.v_shortcut else out


def window_attention(module, x, hw):
    """All window attentions of a ``(B, H*W, C)`` map (Swin, Swin V2, LSA
    windows) as one dense attention over the zero-padded map:
    (A (B, heads, Np, Np), the module's output by hand, real positions)."""
    w_msa, ws = module.w_msa, module.window_size
    shift = module.shift_size
    H, W = hw
    if min(H, W) == ws and not module.pad_small_map:
        shift = 0
    B, _, C = x.shape
    Hp, Wp = -(-H // ws) * ws, -(-W // ws) * ws
    grid = x.new_zeros(B, Hp, Wp, C, dtype=torch.double)
    grid[:, :H, :W] = x.reshape(B, H, W, C).double()
    r, c = torch.arange(Hp).repeat_interleave(Wp), torch.arange(Wp).repeat(Hp)
    rs, cs = (r - shift) % Hp, (c - shift) % Wp  # after the cyclic shift
    window = (rs // ws) * (Wp // ws) + cs // ws
    # relative offsets within a window, from 0
    dy = (rs % ws)[:, None] - (rs % ws)[None] + ws - 1
    dx = (cs % ws)[:, None] - (cs % ws)[None] + ws - 1
    q, k, v = _qkv(w_msa, grid.reshape(B, Hp * Wp, C), w_msa.num_heads)
    if hasattr(w_msa, 'cpb_mlp'):  # Swin V2 (Liu et al. 2022, Sec. 3.2)
        q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        scale = w_msa.logit_scale.double().clamp(max=math.log(100)).exp()
        # continuous position bias of the model's log-spaced offsets
        coords = w_msa.relative_coords_table[0].double()
        mlp = w_msa.cpb_mlp
        table = 16 * torch.sigmoid(lin(mlp[2], torch.relu(lin(mlp[0],
                                                              coords))))
        logits = q @ k.transpose(-2, -1) * scale + table[dy, dx].permute(
            2, 0, 1)
    elif hasattr(w_msa, 'relative_position_bias_table'):
        table = w_msa.relative_position_bias_table.double()
        logits = _logits(w_msa, q, k) + table[dy * (2 * ws - 1) + dx].permute(
            2, 0, 1)
    else:  # DaViT's: no position bias
        logits = _logits(w_msa, q, k)
    if shift > 0:  # mmpretrain's mask: -100 across shift regions
        def region(z, size):
            return (z >= size - ws).long() + (z >= size - shift).long()
        reg = region(rs, Hp) * 3 + region(cs, Wp)
        logits = logits - 100. * (reg[:, None] != reg[None]).double()
    logits = logits.masked_fill(window[:, None] != window[None],
                                float('-inf'))
    A, out = _attend(logits, v)
    real = (r < H) & (c < W)
    return A, lin(w_msa.proj, out)[:, real], real


def spatially_reduced(module, x, hw):
    """What keys and values attend over in PVT's and Twins' reduced
    attention: the float64 ``(B, N, C)`` map ``x`` through the module's
    ``sr`` conv (its own stride and padding) and ``norm`` where
    ``sr_ratio > 1``, else ``x``."""
    if not module.sr_ratio > 1:
        return x
    B, N, C = x.shape
    sr = module.sr
    x_kv = F.conv2d(x.transpose(1, 2).reshape(B, C, *hw), sr.weight.double(),
                    sr.bias.double(), sr.stride, sr.padding)
    return norm(module.norm, x_kv.flatten(2).transpose(1, 2))


def sr_attention(module, x, hw):
    """PVT's spatial-reduction attention of ``x`` by hand from
    ``nn.MultiheadAttention``'s weights: (A (B, H, N, M), the module's
    output without its identity)."""
    mha = module.attn
    x = x.double()
    B = x.shape[0]
    x_kv = spatially_reduced(module, x, hw)
    q, k, v = (_heads(F.linear(t, w, b), B, mha.num_heads) for t, w, b in zip(
        (x, x_kv, x_kv), mha.in_proj_weight.double().chunk(3),
        mha.in_proj_bias.double().chunk(3)))
    A, out = _attend(_logits(mha, q, k), v)
    return A, lin(mha.out_proj, out)


def _update(Y, AY, residual_norm, renormalise=False):
    new = (Y + AY) / 2 if residual_norm else AY
    return new / new.sum(-1, keepdim=True) if renormalise else new


def _check(ours, theirs, size=None):
    """The hand attention's output is the module's: float32 against
    float64, within 1e-5 of the largest value involved (``size``; ~100
    float32 ulps, room for the sums over width and keys; a wrong bias,
    scale or mask moves it by > 1e-2)."""
    size = theirs.abs().max() if size is None else size
    assert (ours.double() - theirs).abs().max() <= 1e-5 * max(size, 1.)


def dense_reference(model, images, pixel_weights, targets,
                    facts: Facts = Facts(), **options):
    """:func:`dense_labels` of an eval forward of ``model``."""
    with attention_calls(model, *facts.attentions) as calls, torch.no_grad():
        model(images)
        return dense_labels(model, calls, pixel_weights, targets, facts,
                            **options)


def dense_labels(model, calls, pixel_weights, targets, facts: Facts = Facts(),
                 area_share=None, align_layers='all', residual_norm=True,
                 keeps=None, check=True):
    """Labels before the first and after every block, and the final label,
    from the captured attention ``calls`` of one forward of ``model``, a
    family of ``facts``.

    ``align_layers``: the blocks that align (``'all'``, ``'last'`` or
    indices, negative from the end); ``keeps[i]``: a ``(B,)`` bool per
    drop-path call of block ``i``, in order, the samples it kept (the
    attention branch's first; a sample it dropped keeps its labels in that
    branch); ``check``: compare each hand attention's output with the
    module's (eval forwards only)."""
    history, n = [], len(calls)
    layers = None if align_layers == 'all' else [-1] if \
        align_layers == 'last' else align_layers

    def step(Y, AY=None, renormalise=False, branches=(), before=(),
             attention_keep=(0, ), residual=True):
        """Block ``len(history) - 1``'s update of ``Y``, recorded; without
        ``AY``, the initial labels. ``AY``: ``Ā Y``, or a function of the
        labels after ``before``. ``branches`` (after the attention) and
        ``before``: in order, ``(W, k)`` per residual convolution branch,
        ``W(Y)`` its window means, ``k`` the index of its drop-path call
        in the block (``None``: it has none), or a function ``Y -> Y'``, a
        token step (a merge, a conv on the trunk), which applies in a block
        that does not align too. ``attention_keep``: the indices of the
        drop-path calls on the attention branch (all must keep it).
        ``residual``: ``False`` for a block that does not add ``Y`` (``Y <-
        Ā Y``, no drop-path on it)."""
        i = len(history) - 1
        kept = keeps[i] if keeps is not None and i >= 0 else []
        aligns = AY is not None and (layers is None or i in layers
                                     or i - n in layers)

        def keep(moved, Y, ks):
            ks = [kept[k] for k in ks if k is not None] if kept else []
            return torch.where(torch.stack(ks).all(0).view(-1, 1, 1), moved,
                               Y) if ks else moved

        def run(Y, ops):
            for op in ops:
                if callable(op):
                    Y = op(Y)
                elif aligns:
                    W, k = op
                    Y = keep(_update(Y, W(Y), residual_norm), Y, [k])
            return Y

        new = run(Y, before)
        if aligns:
            moved = _update(new, AY(new) if callable(AY) else AY,
                            residual_norm and residual, renormalise)
            new = keep(moved, new, attention_keep) if residual else moved
        new = run(new, branches)
        history.append(new)
        return new

    if facts.layout is not None:
        layout = facts.layout
    elif hasattr(model, 'stages'):
        layout = swin_layout
    elif hasattr(model, 'layers') and isinstance(model.layers[0],
                                                 type(model.layers)):
        layout = pvt_layout
    else:
        layout = partial(token_layout, facts=facts, area_share=area_share,
                         area_of=lambda share: torch.einsum(
                             'bs,bsc->bc', share.double(), targets.double()),
                         pixel_weights=pixel_weights)
    final = layout(model, calls, pixel_labels(pixel_weights, targets), step,
                   _check if check else lambda *args: None)
    return final, history


def swin_layout(model, calls, pix, step, verify):
    """Swin, Swin V2, SL-Swin: window attention over the padded map (each
    call's ``hw_shape``), merges (or SPT pooling) between stages, V2's
    before a stage's blocks; the head reads the mean token of the last
    output stage."""
    def merge(ds, Y, hw):  # patch merging or SPT pooling
        return embed_labels(ds, Y.reshape(Y.shape[0], *hw, -1))

    Y, final = step(embed_labels(model.patch_embed, pix)), None
    hw, it = calls[0][1][1], iter(calls)
    v2 = type(model).__name__ == 'SwinTransformerV2'
    after = getattr(model, 'out_after_downsample', False)
    for s, stage in enumerate(model.stages):
        if v2 and stage.downsample is not None:
            Y = merge(stage.downsample, Y, hw)
        for _ in stage.blocks:
            module, args, _, out = next(it)
            hw = tuple(args[1])
            A, dense_out, real = window_attention(module, args[0], hw)
            verify(out, dense_out)
            # padded keys carry no label: only the real ones count
            Y = step(Y, A.mean(1)[:, real][..., real] @ Y, renormalise=True)
        ds = None if v2 else stage.downsample
        if ds is not None and after:
            Y = merge(ds, Y, hw)
            hw = (-(-hw[0] // 2), -(-hw[1] // 2))
        if s in model.out_indices:
            final = Y.mean(1)
        if ds is not None and not after:
            Y = merge(ds, Y, hw)
    return final


def pvt_layout(model, calls, pix, step, verify):
    """mmdet's PVT (v1, v2): ``(embed, blocks, norm)`` per stage, each
    stage's embedding the mean under its conv's windows, keys reduced by
    the ``sr`` conv's windows, v2's ConvFFN a residual branch of its 3x3
    depth-wise conv's window means (its drop-path the block's second); the
    head reads the mean token of the last output stage."""
    it, grid, final = iter(calls), pix, None
    for s, (embed, blocks, _) in enumerate(model.layers):
        Y, hw = conv_means(grid, embed.projection)
        if s == 0:
            step(Y)
        for block in blocks:
            if not hasattr(block, 'attn'):  # v1's position embedding
                continue
            module, args, kwargs, out = next(it)
            A, dense_out = sr_attention(module, args[0], hw)
            verify(out - kwargs['identity'], dense_out, out.abs().max())
            Y_kv = Y if module.sr_ratio == 1 else conv_means(
                Y.reshape(-1, *hw, Y.shape[-1]), module.sr)[0]
            convs = [m for m in block.ffn.modules()
                     if isinstance(m, torch.nn.Conv2d)
                     and m.kernel_size[0] > 1]
            Y = step(Y, A.mean(1) @ Y_kv, branches=[(
                lambda Y, conv=conv, hw=hw: conv_means(
                    Y.reshape(-1, *hw, Y.shape[-1]), conv)[0], 1)
                for conv in convs])
        grid = Y.reshape(-1, *hw, Y.shape[-1])
        if s in model.out_indices:
            final = Y.mean(1)
    return final


def t2t_layout(model, calls, pix, step, verify):
    """T2T-ViT: ``soft_split0``'s windows (7x7, stride 4, padding 2) give
    the first tokens; each T2T block is followed by a soft split (3x3,
    stride 2, padding 1: window means); then the class token, at the area
    label (each source's pixel share), and the encoder; the head reads by
    ``out_type``. Every attention is :func:`t2t_attention`."""
    t2t, it = model.tokens_to_token, iter(calls)
    Y, hw = conv_means(pix, t2t.soft_split0)
    step(Y)
    for split in (t2t.soft_split1, t2t.soft_split2):
        module, args, kwargs, out = next(it)
        A, dense_out = t2t_attention(module, args, kwargs)
        verify(out, dense_out)
        Y, hw = conv_means(step(Y, A.mean(1) @ Y).reshape(-1, *hw,
                                                           Y.shape[-1]), split)
    area = pix.mean((1, 2))[:, None]
    Y = torch.cat([area.expand(-1, model.num_extra_tokens, -1), Y], 1)
    for module, args, kwargs, out in it:
        A, dense_out = t2t_attention(module, args, kwargs)
        verify(out, dense_out)
        Y = step(Y, A.mean(1) @ Y)
    return token_readout(model)(Y)


def token_readout(model):
    """What a ViT-like head reads, by ``out_type`` or timm's
    ``global_pool``: ``(B, N, C)`` -> ``(B, C)``."""
    inner = getattr(model, 'timm_model', model)
    prefix = getattr(inner, 'num_prefix_tokens', None) or getattr(
        inner, 'num_extra_tokens', 0)
    pool = getattr(inner, 'out_type', None) or inner.global_pool
    if getattr(inner, 'dist_token', None) is not None and hasattr(
            inner, 'global_pool'):  # timm's distilled head
        return lambda Y: (Y[:, 0] + Y[:, 1]) / 2
    if pool in ('cls_token', 'token'):
        return lambda Y: Y[:, 0]
    start = 0 if getattr(inner, 'pool_include_prefix', False) else prefix
    return lambda Y: Y[:, start:].mean(1)


def token_layout(model, calls, pix, step, verify, facts, area_share,
                 area_of, pixel_weights):
    """A token sequence (ViT, DeiT, BEiT, timm, or a family of ``facts``):
    the extra tokens start at the area label (``area_share``, default each
    source's pixel share), the patches at their embedding's; each block
    ``Y <- (Y + Ā Y) / 2``."""
    inner = getattr(model, 'timm_model', model)
    embed = facts.embed or partial(embed_labels, inner.patch_embed)
    prefix = facts.prefix
    if prefix is None:
        prefix = getattr(inner, 'num_prefix_tokens', None) or getattr(
            inner, 'num_extra_tokens', 0)
    area = area_of(pixel_weights.mean((2, 3)) if area_share is None
                   else area_share)
    Y = step(torch.cat([area[:, None].expand(-1, prefix, -1), embed(pix)],
                       1))
    for module, args, kwargs, out in calls:
        A, dense_out = (facts.attention or token_attention)(module, args,
                                                            kwargs)
        verify(out, dense_out)
        Y = step(Y, A.mean(1) @ Y)
    return (facts.readout or token_readout(model))(Y)


# -- Twins, DaViT, TinyViT ------------------------------------------------
def map_means(conv, hw):
    """``W``: ``(B, h*w, C)`` labels of an ``hw`` map -> their means under
    ``conv``'s windows (a conv that keeps the grid, or a merge)."""
    return lambda Y: conv_means(Y.reshape(-1, *hw, Y.shape[-1]), conv)[0]


def gsa_attention(module, x, hw):
    """Twins' global sub-sampled attention of ``x`` by hand: q from ``q``,
    keys and values from ``kv`` of the map reduced by the ``sr`` conv and
    its norm, SDPA's scale: (A (B, H, N, M), the module's output)."""
    x = x.double()
    B = x.shape[0]
    x_kv = spatially_reduced(module, x, hw)
    q = _heads(lin(module.q, x), B, module.num_heads)
    k, v = (_heads(t, B, module.num_heads)
            for t in lin(module.kv, x_kv).chunk(2, -1))
    A, out = _attend(_logits(module, q, k), v)
    return A, lin(module.proj, out)


def local_attention(module, x, hw):
    """Twins' locally-grouped attention of a ``(B, H*W, C)`` map as one
    dense attention over the bottom/right zero-padded map, windows from
    coordinates, with the module's padding mask: -1000 between a padded
    and a real position, where a side that is not padded marks every
    position padded (mmpretrain fills ``mask[-pad:]``, and ``-0:`` is all):
    with one side padded, padded keys are attended.
    (A (B, heads, Np, Np), the module's output, real positions)."""
    ws, (H, W) = module.window_size, hw
    B, _, C = x.shape
    Hp, Wp = -(-H // ws) * ws, -(-W // ws) * ws
    grid = x.new_zeros(B, Hp, Wp, C, dtype=torch.double)
    grid[:, :H, :W] = x.reshape(B, H, W, C).double()
    r, c = torch.arange(Hp).repeat_interleave(Wp), torch.arange(Wp).repeat(Hp)
    window = (r // ws) * (Wp // ws) + c // ws
    q, k, v = _qkv(module, grid.reshape(B, Hp * Wp, C), module.num_heads)
    every = torch.ones_like(r, dtype=torch.bool)
    marked = (r >= H if Hp > H else every) | (c >= W if Wp > W else every)
    logits = _logits(module, q, k) - 1000. * (
        marked[:, None] != marked[None]).double()
    logits = logits.masked_fill(window[:, None] != window[None],
                                float('-inf'))
    A, out = _attend(logits, v)
    real = (r < H) & (c < W)
    return A, lin(module.proj, out)[:, real], real


def twins_layout(model, calls, pix, step, verify):
    """Twins PCPVT and SVT: per stage, its embedding (non-overlapping,
    corner padded), blocks of global sub-sampled attention (keys the means
    under the ``sr`` conv's windows) or locally-grouped attention (windows,
    padded keys carry no label: renormalised), the PEG after the first
    block a residual branch of its 3x3 conv's window means (no drop-path).
    A GSA block's attention branch runs two drop-paths (its ``out_drop``,
    then the block's ``drop_path`` when it is one); an LSA block's only the
    block's. The head reads the mean token of the last output stage."""
    it, grid, final = iter(calls), pix, None
    for s, (embed, blocks, peg) in enumerate(zip(
            model.patch_embeds, model.stages, model.position_encodings)):
        patch = embed.projection.kernel_size[0]
        Y = patch_means(grid, patch)
        hw = tuple(-(-n // patch) for n in grid.shape[1:3])
        if s == 0:
            step(Y)
        for j, block in enumerate(blocks):
            module, args, _, out = next(it)
            dp = int(isinstance(block.drop_path, DropPath))
            pegs = [(map_means(peg.proj, hw), None)] if j == 0 else []
            if hasattr(module, 'kv'):  # GSA
                A, dense_out = gsa_attention(module, args[0], hw)
                Y_kv = Y if module.sr_ratio == 1 else map_means(module.sr,
                                                                hw)(Y)
                verify(out, dense_out)
                Y = step(Y, A.mean(1) @ Y_kv, branches=pegs,
                         attention_keep=(0, 1)[:1 + dp])
            else:
                A, dense_out, real = local_attention(module, args[0], hw)
                verify(out, dense_out)
                Y = step(Y, A.mean(1)[:, real][..., real] @ Y,
                         renormalise=True, branches=pegs,
                         attention_keep=(0, )[:dp])
        grid = Y.reshape(-1, *hw, Y.shape[-1])
        if s in model.out_indices:
            final = Y.mean(1)
    return final


def davit_layout(model, calls, pix, step, verify):
    """DaViT: the embedding's 7x7 stride-4 windows ('same' padding, less
    on the top/left), per block a residual branch of the spatial block's
    ``cpe1`` (window means of its 3x3 conv), its window attention
    (``window_attention``: no position bias; padded keys carry no label),
    then the branches of the spatial ``cpe2`` and the channel block's two
    CPEs (the channel attention mixes channels: no label moves); a 2x2
    stride-2 downsample between stages; the head reads the mean token of
    the last output stage."""
    conv = model.patch_embed.projection
    (k, _), (s, _) = conv.kernel_size, conv.stride
    hw = tuple(-(-n // s) for n in pix.shape[1:3])
    top = max((hw[0] - 1) * s + k - pix.shape[1], 0) // 2
    assert pix.shape[1] == pix.shape[2]  # (one padding for H and W)
    Y = step(window_means(pix, hw, k, s, top))
    it, final = iter(calls), None
    for i, stage in enumerate(model.stages):
        for block in stage.blocks:
            module, args, _, out = next(it)
            hw = tuple(args[1])
            A, dense_out, real = window_attention(module, args[0], hw)
            verify(out, dense_out)
            sp, ch = block.spatial_block, block.channel_block
            Y = step(Y, lambda Y, A=A.mean(1)[:, real][..., real]: A @ Y,
                     renormalise=True,
                     before=[(map_means(sp.cpe1.proj, hw), None)],
                     branches=[(map_means(m.proj, hw), None)
                               for m in (sp.cpe2, ch.cpe1, ch.cpe2)])
        if i in model.out_indices:
            final = Y.mean(1)
        if stage.downsample is not None:
            Y, hw = conv_means(Y.reshape(-1, *hw, Y.shape[-1]),
                               stage.downsample.projection)
    return final


def le_attention(module, args, kwargs):
    """mmpretrain's ``LeAttention`` (TinyViT's windows) of ``args[0]`` by
    hand: its LayerNorm, per head ``[key_dim, key_dim, d]`` of ``qkv``'s
    output, scale ``key_dim ** -0.5``, and the bias of each pair's offset
    ``(|dy|, |dx|)`` in the square window of side ``w`` (its table lists
    offsets as first met from position (0, 0): ``(a, b)`` is entry ``a * w
    + b``): (A (B, H, N, N), the module's output)."""
    m, x = module, norm(module.norm, args[0].double())
    B, N, _ = x.shape
    q, k, v = (t.transpose(1, 2) for t in lin(m.qkv, x).view(
        B, N, m.num_heads, -1).split([m.key_dim, m.key_dim, m.d], -1))
    w = math.isqrt(N)
    dy = (torch.arange(N) // w)[:, None] - (torch.arange(N) // w)[None]
    dx = (torch.arange(N) % w)[:, None] - (torch.arange(N) % w)[None]
    bias = m.attention_biases.double()[:, dy.abs() * w + dx.abs()]
    A, out = _attend(q @ k.transpose(-2, -1) * m.key_dim**-0.5 + bias, v)
    return A, lin(m.proj, out)


def windows_to_map(A, hw, ws):
    """``(B*nW, heads, ws², ws²)`` window attention -> its head mean over
    the bottom/right padded map ``(B, Np, Np)`` (zero across windows), and
    the real positions."""
    H, W = hw
    Hp, Wp = -(-H // ws) * ws, -(-W // ws) * ws
    r, c = torch.arange(Hp).repeat_interleave(Wp), torch.arange(Wp).repeat(Hp)
    window, at = (r // ws) * (Wp // ws) + c // ws, (r % ws) * ws + c % ws
    A = A.mean(1).view(-1, (Hp // ws) * (Wp // ws), ws * ws, ws * ws)
    dense = A[:, window[:, None], at[:, None], at[None]]
    return dense * (window[:, None] == window[None]), (r < H) & (c < W)


def tinyvit_layout(model, calls, pix, step, verify):
    """TinyViT: its stem's two 3x3 stride-2 convs (window means, in order);
    the MBConv blocks residual branches of their 3x3 depth-wise conv's
    window means and merges the means under their stride-2 conv's windows,
    both before the next attention (in its block); each block's window
    attention over the zero-padded map (padded keys attended, carrying no
    label: renormalised), then its local conv's window means on the trunk.
    Drop-path calls: the MBConv blocks', then the attention branch's. The
    head reads the mean token of the last stage (``out_indices``: it)."""
    grid = pix
    for conv in (model.patch_embed.seq[0].conv2d,
                 model.patch_embed.seq[2].conv2d):
        Y, hw = conv_means(grid, conv)
        grid = Y.reshape(-1, *hw, Y.shape[-1])
    Y, it, before, dps = step(Y), iter(calls), [], 0
    for stage in model.stages:
        for block in stage.blocks:
            if not hasattr(block, 'attn'):  # MBConv
                dp = isinstance(block.drop_path, DropPath)
                before.append((map_means(block.conv2.conv2d, hw),
                               dps if dp else None))
                dps += dp
                continue
            module, args, _, out = next(it)
            A, dense_out = le_attention(module, args, {})
            verify(out, dense_out)
            A, real = windows_to_map(A, hw, block.window_size)
            Y = step(Y, lambda Y, A=A[:, real][..., real]: A @ Y,
                     renormalise=True, before=before,
                     attention_keep=(dps, )[:isinstance(block.drop_path,
                                                         DropPath)],
                     branches=[map_means(block.local_conv.conv2d, hw)])
            before, dps = [], 0
        if stage.downsample is not None:
            merge = stage.downsample.conv2.conv2d
            before.append(map_means(merge, hw))
            (k, _), (s, _), (p, _) = merge.kernel_size, merge.stride, \
                merge.padding
            hw = tuple((n + 2 * p - k) // s + 1 for n in hw)
    assert list(model.out_indices) == [len(model.stages) - 1]
    return Y.mean(1)
