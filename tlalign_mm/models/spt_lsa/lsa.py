"""Locality Self-Attention (LSA), Lee et al. 2021, "Vision Transformer for
Small-Size Datasets", as drop-ins for mmpretrain's attention modules.

LSA masks each token's similarity to itself out of the softmax (diagonal
masking) and learns a temperature per head: as in the authors' code, the
parameter is the logits' multiplier ``scale = 1 / tau`` (state dict key
``scale``, ``(num_heads,)``), initialised to ``head_dim ** -0.5`` (or
``qk_scale``), so LSA starts as the usual attention with a masked diagonal.

:class:`LocalitySelfAttention` (ViT) keeps ``MultiheadAttention``'s call
pattern: its ``scaled_dot_product_attention`` attribute gets an
``attn_mask`` ``-inf`` on the diagonal and ``scale=1.`` (the per-head scale
goes on the queries). TL-Align's ViT description taps q and k from ``qkv``
and reads ``scale`` and ``diagonal_masking``; :class:`LocalityWindowMSA`
(Swin) computes its softmax through ``self.softmax``, which Swin's
description taps.
"""
from typing import Optional

import torch
import torch.nn as nn
from mmpretrain.models.utils import MultiheadAttention, WindowMSA
from mmpretrain.models.utils.attention import scaled_dot_product_attention
from mmpretrain.registry import MODELS


def diagonal_mask(num_tokens: int, dtype: torch.dtype,
                  device=None) -> torch.Tensor:
    """``(N, N)`` additive attention mask: ``-inf`` on the diagonal, 0
    elsewhere."""
    mask = torch.zeros(num_tokens, num_tokens, dtype=dtype, device=device)
    return mask.fill_diagonal_(float('-inf'))


class _Locality:
    """What both LSA modules add to the attention they subclass."""

    def _init_locality(self, num_heads: int, scale: float,
                       diagonal_masking: bool, learnable_temperature: bool):
        self.diagonal_masking = diagonal_masking
        self.learnable_temperature = learnable_temperature
        scale = torch.full((num_heads, ), float(scale))
        if learnable_temperature:
            self.scale = nn.Parameter(scale)
        else:
            self.register_buffer('scale', scale, persistent=False)

    def extra_repr(self) -> str:
        return (f'diagonal_masking={self.diagonal_masking}, '
                f'learnable_temperature={self.learnable_temperature}')


@MODELS.register_module()
class LocalitySelfAttention(_Locality, MultiheadAttention):
    """Locality Self-Attention, a drop-in for mmpretrain's
    ``MultiheadAttention`` (a single token's diagonal is not masked).

    Args:
        embed_dims, num_heads, input_dims, attn_drop, proj_drop,
            dropout_layer, qkv_bias, proj_bias, v_shortcut, use_layer_scale,
            layer_scale_init_value, init_cfg: as ``MultiheadAttention``.
        qk_scale (float, optional): initial value of the learned scale;
            defaults to ``head_dim ** -0.5``.
        diagonal_masking (bool): mask each token's attention to itself.
            Defaults to True.
        learnable_temperature (bool): learn the per-head scale. Defaults to
            True; if False it is a fixed (non-persistent) buffer.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 input_dims: Optional[int] = None,
                 attn_drop: float = 0.,
                 proj_drop: float = 0.,
                 dropout_layer: dict = dict(type='Dropout', drop_prob=0.),
                 qkv_bias: bool = True,
                 qk_scale: Optional[float] = None,
                 proj_bias: bool = True,
                 v_shortcut: bool = False,
                 use_layer_scale: bool = False,
                 layer_scale_init_value: float = 0.,
                 diagonal_masking: bool = True,
                 learnable_temperature: bool = True,
                 init_cfg: Optional[dict] = None):
        super().__init__(
            embed_dims, num_heads, input_dims=input_dims, attn_drop=attn_drop,
            proj_drop=proj_drop, dropout_layer=dropout_layer,
            qkv_bias=qkv_bias, qk_scale=None, proj_bias=proj_bias,
            v_shortcut=v_shortcut, use_layer_scale=use_layer_scale,
            layer_scale_init_value=layer_scale_init_value, init_cfg=init_cfg)
        # mmpretrain's SDPA (torch's fused one); the scale goes in explicitly.
        self.scaled_dot_product_attention = scaled_dot_product_attention
        self._init_locality(
            num_heads, qk_scale if qk_scale is not None else
            self.head_dims**-0.5, diagonal_masking, learnable_temperature)

    @classmethod
    def from_multihead_attention(cls, mha: MultiheadAttention,
                                 **kwargs) -> 'LocalitySelfAttention':
        """The LSA version of ``mha``: same sizes, and it takes over
        ``mha``'s projections, dropouts, drop-path and layer scale (so it
        keeps their configuration and weights)."""
        lsa = cls(mha.embed_dims, mha.num_heads, input_dims=mha.input_dims,
                  attn_drop=mha.attn_drop, qkv_bias=mha.qkv.bias is not None,
                  proj_bias=mha.proj.bias is not None,
                  v_shortcut=mha.v_shortcut, init_cfg=mha.init_cfg, **kwargs)
        for name in ('qkv', 'proj', 'proj_drop', 'out_drop', 'gamma1'):
            setattr(lsa, name, getattr(mha, name))
        return lsa

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, _ = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads,
                                  self.head_dims).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale.view(1, -1, 1, 1).to(q.dtype)
        mask = diagonal_mask(N, q.dtype, q.device) \
            if self.diagonal_masking and N > 1 else None

        attn_drop = self.attn_drop if self.training else 0.
        x = self.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=attn_drop, scale=1.)
        x = x.transpose(1, 2).reshape(B, N, self.embed_dims)

        x = self.proj(x)
        x = self.out_drop(self.gamma1(self.proj_drop(x)))

        if self.v_shortcut:
            x = v.squeeze(1) + x
        return x


@MODELS.register_module()
class LocalityWindowMSA(_Locality, WindowMSA):
    """Locality Self-Attention inside Swin windows, a drop-in for
    mmpretrain's ``WindowMSA`` (``ShiftWindowMSA(window_msa=...)``).

    The logits are ``scale_h * q.k + relative position bias (+ shift
    mask)``, the diagonal set to ``-inf``, then ``self.softmax``.

    Args:
        embed_dims, window_size, num_heads, qkv_bias, attn_drop, proj_drop,
            init_cfg: as ``WindowMSA``.
        qk_scale (float, optional): initial value of the learned scale;
            defaults to ``head_dim ** -0.5``.
        diagonal_masking, learnable_temperature (bool): as
            :class:`LocalitySelfAttention`.
    """

    def __init__(self, embed_dims, window_size, num_heads, qkv_bias=True,
                 qk_scale=None, attn_drop=0., proj_drop=0.,
                 diagonal_masking=True, learnable_temperature=True,
                 init_cfg=None):
        super().__init__(
            embed_dims, window_size, num_heads, qkv_bias=qkv_bias,
            qk_scale=qk_scale, attn_drop=attn_drop, proj_drop=proj_drop,
            init_cfg=init_cfg)
        scale = self.scale  # WindowMSA's float
        del self.scale
        self._init_locality(num_heads, scale, diagonal_masking,
                            learnable_temperature)

    @classmethod
    def from_window_msa(cls, w_msa: WindowMSA,
                        **kwargs) -> 'LocalityWindowMSA':
        """The LSA version of ``w_msa``, taking over its projections,
        relative position bias table and dropouts."""
        lsa = cls(w_msa.embed_dims, w_msa.window_size, w_msa.num_heads,
                  qkv_bias=w_msa.qkv.bias is not None,
                  qk_scale=float(w_msa.scale), init_cfg=w_msa.init_cfg,
                  **kwargs)
        for name in ('qkv', 'proj', 'attn_drop', 'proj_drop',
                     'relative_position_bias_table'):
            setattr(lsa, name, getattr(w_msa, name))
        return lsa

    def forward(self, x, mask=None):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads,
                                  C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]

        q = q * self.scale.view(1, -1, 1, 1).to(q.dtype)
        attn = q @ k.transpose(-2, -1)

        relative_position_bias = self.relative_position_bias_table[
            self.relative_position_index.view(-1)].view(
                self.window_size[0] * self.window_size[1],
                self.window_size[0] * self.window_size[1], -1)
        relative_position_bias = relative_position_bias.permute(
            2, 0, 1).contiguous()
        attn = attn + relative_position_bias.unsqueeze(0)

        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N,
                             N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
        if self.diagonal_masking and N > 1:
            attn = attn.masked_fill(
                torch.eye(N, dtype=torch.bool, device=attn.device),
                float('-inf'))
        attn = self.softmax(attn)
        attn = self.attn_drop(attn)

        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x
