"""Tiny models of every family with attention far from uniform, random
mixes, and class-space helpers shared by the model tests."""
import math

import torch
import torch.nn as nn
from mmcv.cnn.bricks.transformer import PatchEmbed
from mmengine.model import BaseModule, Sequential
from mmpretrain.models.backbones.vision_transformer import (
    TransformerEncoderLayer,
)
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401  (registration)

# Narrow widths, few blocks, small images; every label path still occurs
# (extra tokens, padding, shifted windows, merges, reductions, SPT views).
VIT = dict(type='VisionTransformer', img_size=32, patch_size=8,
           arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                     feedforward_channels=64))
BEIT = dict(VIT, type='BEiTViT', drop_path_rate=0.1)  # (inactive in eval)
SWIN = dict(type='SwinTransformer', img_size=64, out_indices=(1, ),
            drop_path_rate=0., arch=dict(embed_dims=16, depths=[2, 2],
                                         num_heads=[2, 4]))
SWIN3 = dict(embed_dims=16, depths=[2, 2, 2], num_heads=[2, 2, 4])
SWIN_V2 = dict(SWIN, type='SwinTransformerV2', window_size=4,
               pretrained_window_sizes=[0, 0],
               arch=dict(SWIN['arch'], extra_norm_every_n_blocks=0))
PVT = dict(type='mmdet.PyramidVisionTransformerV2', embed_dims=8,
           num_layers=[2, 1, 1, 1], num_heads=[1, 2, 2, 4],
           mlp_ratios=[2, 2, 2, 2], out_indices=(3, ), drop_path_rate=0.)
SL_VIT = dict(type='SLViT', img_size=32, patch_size=4,
              arch=dict(embed_dims=24, num_layers=3, num_heads=3,
                        feedforward_channels=48))
SL_SWIN = dict(type='SLSwin', img_size=32, drop_path_rate=0.,
               arch=dict(embed_dims=24, depths=[2, 2, 2],
                         num_heads=[2, 2, 4]))
EVA02 = dict(VIT, type='ViTEVA02', out_type='avg_featmap', drop_path_rate=0.1)
# main depth 7: out_indices index HiViT's 6 stem blocks too (mmpretrain's)
HIVIT = dict(type='HiViT', img_size=64, rpe=True, drop_path_rate=0.1,
             out_indices=[6], arch=dict(embed_dims=64, depths=[1, 1, 7],
                                        num_heads=2))
T2T = dict(type='T2T_ViT', img_size=64, embed_dims=32, num_layers=3,
           t2t_cfg=dict(token_dims=16), drop_path_rate=0.1,
           layer_cfgs=dict(num_heads=2, feedforward_channels=64))
TWINS_ARCH = dict(embed_dims=[8, 16], depths=[2, 2], num_heads=[1, 2],
                  patch_sizes=[4, 2], strides=[4, 2], mlp_ratios=[2, 2],
                  sr_ratios=[2, 1])
TWINS_PCPVT = dict(type='PCPVT', arch=TWINS_ARCH, out_indices=(1, ),
                   qkv_bias=True, drop_path_rate=0.1)
TWINS_SVT = dict(TWINS_PCPVT, type='SVT', arch=dict(TWINS_ARCH,
                                                    window_sizes=[4, 4]))
DAVIT = dict(type='DaViT', arch=dict(embed_dims=16, depths=[1, 2],
                                     num_heads=[2, 4]),
             window_size=4, out_indices=(1, ))
TINYVIT = dict(type='TinyViT', img_size=(64, 64), window_size=[0, 3, 4],
               arch=dict(channels=[8, 16, 24], num_heads=[1, 2, 3],
                         depths=[2, 2, 1]), out_indices=[2])
TIMM = dict(type='PooledTIMMBackbone', model_name='deit_tiny_patch16_224',
            img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2,
            drop_path_rate=0.1)  # drop-path modules, not Identity
# Queries that are not the tokens: 16x16 tokens pooled to 8x8 and 4x4
# (keys by 4, 2, 1); LeViT's smallest arch (no custom arch in mmpretrain
# 1.2.0) on 8x8 tokens, subsampled to 4x4 and 2x2; XCiT on 4x4 tokens.
MVIT = dict(type='MViT', img_size=64, drop_path_rate=0.2, arch=dict(
    embed_dims=16, num_layers=4, num_heads=2, downscale_indices=[1, 3]))
LEVIT = dict(type='LeViT', arch='128s', img_size=128, drop_path_rate=0.1,
             calibrate_bn=128)
XCIT = dict(type='XCiT', img_size=64, embed_dims=32, depth=2,
            cls_attn_layers=2, num_heads=2, drop_path_rate=0.1)


@MODELS.register_module(force=True)
class TinyViTLike(BaseModule):
    """A ViT the package knows nothing about: not a ``VisionTransformer``
    subclass, only an mmcv ``PatchEmbed`` and mmpretrain
    ``TransformerEncoderLayer``s, with a class token and the attributes a
    readout needs."""

    out_type = 'cls_token'
    num_extra_tokens = 1

    def __init__(self, embed_dims=32, num_layers=2, num_heads=2, patch=8):
        super().__init__()
        self.patch_embed = PatchEmbed(in_channels=3, embed_dims=embed_dims,
                                      kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dims))
        self.layers = Sequential(*(
            TransformerEncoderLayer(embed_dims, num_heads, 2 * embed_dims)
            for _ in range(num_layers)))

    def forward(self, x):
        x, _ = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1)
        return (self.layers(x)[:, 0], )


def randomise(model, seed=0, sharpen=4.0):
    """Weights with structure: unit-ish position embeddings, extra tokens,
    relative biases (LeAttention's attention biases), q/v biases, layer
    scales, LSA temperatures and Swin V2 logit scales; q/k projections
    scaled so attention is far from uniform."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit('.', 1)[-1]
            if leaf in ('pos_embed', 'cls_token', 'dist_token', 'reg_token',
                        'relative_position_bias_table', 'q_bias', 'v_bias',
                        'rel_pos_h', 'rel_pos_w', 'attention_biases'):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif leaf in ('gamma_1', 'gamma_2'):
                p.copy_(0.2 + 0.8 * torch.rand(p.shape, generator=g))
            elif leaf == 'scale':  # LSA: per head, around head_dim^-.5
                p.mul_(torch.rand(p.shape, generator=g) + 0.5)
            elif leaf == 'logit_scale':  # Swin V2: 2 .. 300 (clamped at 100)
                p.copy_(torch.linspace(math.log(2), math.log(300),
                                       p.numel()).view(p.shape))
            elif name.endswith('cpb_mlp.2.weight'):
                p.normal_(0, 0.3, generator=g)
            elif 'norm' in name and p.dim() == 1:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
        for m in model.modules():
            if isinstance(m, nn.MultiheadAttention):  # PVT
                m.in_proj_weight[:2 * m.embed_dim] *= sharpen
            elif hasattr(m, 'attention_biases') and isinstance(
                    getattr(m, 'qkv', None), nn.Linear):  # LeAttention
                m.qkv.weight.view(m.num_heads, -1, m.qkv.in_features)[
                    :, :2 * m.key_dim] *= sharpen
            elif isinstance(getattr(m, 'kv', None), nn.Linear):  # Twins' GSA
                m.q.weight.mul_(sharpen)
                m.kv.weight[:m.kv.out_features // 2] *= sharpen
            elif isinstance(getattr(m, 'qkv', None), nn.Linear):
                m.qkv.weight[:2 * m.qkv.out_features // 3] *= sharpen
    return model


def build(cfg, seed=0):
    """A randomised backbone in eval mode (mmpretrain backbones'
    ``train()`` returns None: no chaining). ``cfg['fused']``, if given:
    timm's attention path; ``cfg['calibrate_bn']``: the side of the images
    to calibrate BatchNorms on (:func:`calibrate_batch_norms`)."""
    cfg = dict(cfg)
    fused = cfg.pop('fused', None)
    calibrate = cfg.pop('calibrate_bn', None)
    torch.manual_seed(seed)
    model = MODELS.build(cfg)
    randomise(model, seed)
    if calibrate:
        calibrate_batch_norms(model, calibrate, seed)
    if fused is not None:
        for block in model.timm_model.blocks:
            block.attn.fused_attn = fused
    model.eval()
    return model


def calibrate_batch_norms(model, side, seed=0):
    """Every BatchNorm's running statistics from one training-mode forward
    of random ``side``-pixel images, as a trained model has them: at their
    initial (0, 1) the activations of LeViT's default init shrink ~30x per
    stage, and its attention is uniform."""
    norms = [m for m in model.modules()
             if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # the cumulative mean: this batch's
    model.train()
    with torch.no_grad():
        model(torch.randn(8, 3, side, side, generator=torch.Generator(
            ).manual_seed(seed)))
    for m in norms:
        m.momentum = 0.1


def random_mix(B, S, H, W, seed=1, box=None):
    """``(images, pixel_weights, targets)`` of a random mix of ``S`` sources.

    Without ``box``: blocks of 3x3 pixels with random shares (sharpened by a
    fourth power), so patches and windows hold uneven shares. With ``box``
    ``(y1, y2, x1, x2)``: a CutMix box from source 1 (``S`` = 2).
    Targets are random distributions over 10 classes.
    """
    g = torch.Generator().manual_seed(seed)
    if box is None:
        pw = torch.rand(B, S, -(-H // 3), -(-W // 3), generator=g).pow(4)
        pw = pw.repeat_interleave(3, 2).repeat_interleave(3, 3)[..., :H, :W]
        pw = pw / pw.sum(1, keepdim=True)
    else:
        y1, y2, x1, x2 = box
        pw = torch.zeros(B, 2, H, W)
        pw[:, 0] = 1
        pw[:, 0, y1:y2, x1:x2] = 0
        pw[:, 1] = 1 - pw[:, 0]
    targets = torch.rand(B, S, 10, generator=g)
    targets = targets / targets.sum(-1, keepdim=True)
    images = torch.randn(B, 3, H, W, generator=g)
    return images, pw, targets


def in_classes(weights, targets):
    """(B, S) or (B, N, S) source weights -> class space, in float64."""
    spec = 'bs,bsc->bc' if weights.dim() == 2 else 'bns,bsc->bnc'
    return torch.einsum(spec, weights.double(), targets.double())


def assert_distributions(labels, atol=1e-6):
    """float32, non-negative, summing to 1 over the last axis (to a few
    float32 ulps of 1 times the terms summed, far below the ~1e-3 of a
    bf16 or unnormalised rule)."""
    assert labels.dtype == torch.float32
    assert (labels >= 0).all()
    torch.testing.assert_close(labels.sum(-1), torch.ones_like(labels[..., 0]),
                               atol=atol, rtol=0)


def head_samples(model):
    """The list the head's loss appends the data samples it is given to."""
    given, loss = [], model.head.loss
    model.head.loss = lambda x, samples: given.extend(samples) or loss(
        x, samples)
    return given


def identity_attention(query, key, labels, bias=None, scale=None,
                       impl='auto', with_mass=False):
    """``head_mean_attention`` of attention that moves nothing (``A = I``):
    monkeypatch it into :mod:`tlalign_mm.core.records`."""
    labels = labels.float()
    return labels, labels.sum(-1, keepdim=True) if with_mass else None
