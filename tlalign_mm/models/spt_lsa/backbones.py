"""SL-ViT and SL-Swin: mmpretrain's ``VisionTransformer`` and
``SwinTransformer`` with Shifted Patch Tokenization and Locality
Self-Attention (Lee et al. 2021).

Neither is a fork: each builds mmpretrain's model and swaps modules in
place (``use_spt``: the patch embedding and Swin's ``PatchMerging`` become
:class:`ShiftedPatchTokenization`; ``use_lsa``: every attention its LSA
version, taking over the original's projections, dropouts and drop-path),
so the forward, checkpoint hooks and layer-wise lr decay are mmpretrain's
and TL-Align records them with the ViT and Swin descriptions. Both switches
on is the paper's SL-model, one its ablations.
"""
import copy
import math
from typing import Sequence

import torch
from mmengine.model.weight_init import initialize
from mmengine.registry import WEIGHT_INITIALIZERS
from mmpretrain.models.backbones import SwinTransformer, VisionTransformer
from mmpretrain.registry import MODELS
from torch import nn

from .lsa import LocalitySelfAttention, LocalityWindowMSA
from .spt import ShiftedPatchTokenization


def _spt_patch_embed(backbone, in_channels, patch_size, img_size,
                     spt_cfg) -> ShiftedPatchTokenization:
    """The SPT that replaces ``backbone``'s patch embedding, on the token
    grid the backbone was built for."""
    spt = ShiftedPatchTokenization(
        in_channels=in_channels, embed_dims=backbone.embed_dims,
        patch_size=patch_size, input_size=img_size, **spt_cfg)
    expected = tuple(backbone.patch_resolution)
    if tuple(spt.init_out_size) != expected:
        raise ValueError(
            f'{type(backbone).__name__}: the SPT token grid '
            f'{spt.init_out_size} differs from the patch embedding it '
            f'replaces ({expected}); check patch_size, img_size and '
            'spt_cfg.')
    return spt


@WEIGHT_INITIALIZERS.register_module(name='SPTLSAViTInit')
class SPTLSAViTInit:
    """The official small-dataset ViT initialisation (aanna0701/SPT_LSA_ViT
    at 54bd796, ``models/vit.py:14-21``, applied to every module at the end
    of ``ViT.__init__``, line 155; position embedding and class token
    ``torch.randn``, lines 143-145):

    - every ``nn.Linear``: ``xavier_normal_`` weight, zero bias;
    - a patch-embedding ``nn.Conv2d`` (mmpretrain's, where the original has
      ``nn.Linear(C * p * p, dim)`` on flattened patches): normal with the
      xavier std of that Linear, ``sqrt(2 / (C * p * p + dim))``, zero
      bias (``xavier_normal_`` on the conv would count ``p * p`` into the
      fan-out);
    - every ``nn.LayerNorm``: weight 1, bias 0;
    - parameters named ``pos_embed`` and ``cls_token``: standard normal.

    Used as a backbone's ``init_cfg`` (``SLViT`` then runs it alone) or a
    head's.
    """

    def __call__(self, module: nn.Module) -> None:
        for m in module.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
            elif isinstance(m, nn.Conv2d):
                fan_in = m.in_channels * math.prod(m.kernel_size) \
                    // m.groups
                nn.init.normal_(
                    m.weight, std=math.sqrt(2. / (fan_in + m.out_channels)))
            elif isinstance(m, nn.LayerNorm):
                if m.weight is not None:
                    nn.init.ones_(m.weight)
            else:
                continue
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        for name in ('pos_embed', 'cls_token'):
            param = getattr(module, name, None)
            if isinstance(param, torch.Tensor):
                with torch.no_grad():
                    param.normal_()

    def _get_init_info(self):
        return type(self).__name__


def _is_official_vit_init(init_cfg) -> bool:
    return isinstance(init_cfg, dict) and \
        init_cfg.get('type') == 'SPTLSAViTInit'


@MODELS.register_module()
class SLViT(VisionTransformer):
    """ViT for small datasets: mmpretrain's ``VisionTransformer`` with SPT
    and LSA.

    Args:
        arch (str | dict): ``'sl-vit'`` (default; the paper's small-dataset
            ViT: dim 192, depth 9, 12 heads of 16 dims, MLP ratio 2), any
            ``VisionTransformer`` arch, or a custom dict.
        img_size (int | tuple): input size. Defaults to 32.
        patch_size (int): patch size. Defaults to 4 (the paper's at 32 px;
            use 8 at 64 px for Tiny-ImageNet).
        in_channels (int): input channels. Defaults to 3.
        use_spt (bool): patch embedding by SPT. Defaults to True.
        use_lsa (bool): LSA in every layer. Defaults to True.
        spt_cfg (dict): extra arguments of :class:`ShiftedPatchTokenization`
            (``shift_size``, ``padding``, ``norm_cfg``, ``bias``).
        lsa_cfg (dict): extra arguments of :class:`LocalitySelfAttention`
            (``diagonal_masking``, ``learnable_temperature``, ``qk_scale``).
        **kwargs: as :class:`mmpretrain.models.VisionTransformer`;
            ``init_cfg=dict(type='SPTLSAViTInit')`` is the official
            initialisation (:class:`SPTLSAViTInit`).
    """

    arch_zoo = {
        **VisionTransformer.arch_zoo,
        **dict.fromkeys(['sl-vit', 'sl'], {
            'embed_dims': 192, 'num_layers': 9, 'num_heads': 12,
            'feedforward_channels': 384}),
    }

    def __init__(self, arch='sl-vit', img_size=32, patch_size=4,
                 in_channels=3, use_spt=True, use_lsa=True, spt_cfg=dict(),
                 lsa_cfg=dict(), **kwargs):
        super().__init__(arch=arch, img_size=img_size, patch_size=patch_size,
                         in_channels=in_channels, **kwargs)
        self.use_spt, self.use_lsa = use_spt, use_lsa
        if use_spt:
            self.patch_embed = _spt_patch_embed(self, in_channels, patch_size,
                                                img_size, spt_cfg)
        if use_lsa:
            for layer in self.layers:
                layer.attn = LocalitySelfAttention.from_multihead_attention(
                    layer.attn, **lsa_cfg)
        if self.frozen_stages > 0:  # freeze the swapped-in modules too
            self._freeze_stages()

    def init_weights(self):
        """mmpretrain's initialisation, or with ``init_cfg`` of type
        ``'SPTLSAViTInit'`` the official one alone: mmpretrain's would run
        after it and redo the FFNs (xavier-uniform) and ``pos_embed``
        (truncated normal 0.02)."""
        if not _is_official_vit_init(self.init_cfg):
            super().init_weights()
            return
        initialize(self, self.init_cfg)
        self._is_init = True


def _with_ffn_ratio(stage_cfgs, ffn_ratio, num_stages):
    """``stage_cfgs`` with every block's ``ffn_ratio`` defaulting to
    ``ffn_ratio``."""
    if not isinstance(stage_cfgs, Sequence):
        stage_cfgs = [stage_cfgs] * num_stages
    stages = [copy.deepcopy(dict(c)) for c in stage_cfgs]
    for stage in stages:
        blocks = stage.get('block_cfgs', dict())
        many = isinstance(blocks, Sequence)
        blocks = [dict(b) for b in blocks] if many else dict(blocks)
        for b in blocks if many else [blocks]:
            b.setdefault('ffn_ratio', ffn_ratio)
        stage['block_cfgs'] = blocks
    return stages


@MODELS.register_module()
class SLSwin(SwinTransformer):
    """Swin for small datasets: mmpretrain's ``SwinTransformer`` with SPT
    (patch embedding and pooling between stages) and LSA in its windows.

    Args:
        arch (str | dict): ``'sl-swin'`` (default; the paper's: embed dim
            96, depths [2, 6, 4], heads [3, 6, 12]), any ``SwinTransformer``
            arch, or a custom dict.
        img_size (int | tuple): input size. Defaults to 32.
        patch_size (int): patch size. Defaults to 2 (the paper's at 32 px).
        in_channels (int): input channels. Defaults to 3.
        window_size (int): window size. Defaults to 4.
        mlp_ratio (float): default ``ffn_ratio`` of every block. Defaults
            to 2.
        out_indices (Sequence[int], optional): defaults to the last stage.
        stage_cfgs (dict | Sequence[dict]): as ``SwinTransformer``.
        use_spt (bool): SPT as patch embedding and as pooling between
            stages (replacing ``PatchMerging``; same kernel, padding and
            output channels). Defaults to True.
        use_lsa (bool): LSA in every window attention. Defaults to True.
        spt_cfg (dict): extra arguments of every
            :class:`ShiftedPatchTokenization`.
        lsa_cfg (dict): extra arguments of :class:`LocalityWindowMSA`.
        **kwargs: as :class:`mmpretrain.models.SwinTransformer`.
    """

    arch_zoo = {
        **SwinTransformer.arch_zoo,
        **dict.fromkeys(['sl-swin', 'sl'], {
            'embed_dims': 96, 'depths': [2, 6, 4], 'num_heads': [3, 6, 12]}),
    }

    def __init__(self, arch='sl-swin', img_size=32, patch_size=2,
                 in_channels=3, window_size=4, mlp_ratio=2., out_indices=None,
                 stage_cfgs=dict(), use_spt=True, use_lsa=True, spt_cfg=dict(),
                 lsa_cfg=dict(), **kwargs):
        settings = self.arch_zoo[arch.lower()] if isinstance(arch, str) \
            else arch
        num_stages = len(settings['depths'])
        if out_indices is None:
            out_indices = (num_stages - 1, )
        super().__init__(
            arch=arch, img_size=img_size, patch_size=patch_size,
            in_channels=in_channels, window_size=window_size,
            out_indices=out_indices,
            stage_cfgs=_with_ffn_ratio(stage_cfgs, mlp_ratio, num_stages),
            **kwargs)
        self.use_spt, self.use_lsa = use_spt, use_lsa
        if use_spt:
            self.patch_embed = _spt_patch_embed(self, in_channels, patch_size,
                                                img_size, spt_cfg)
            for stage in self.stages:
                merging = stage.downsample
                if merging is None:
                    continue
                kernel = tuple(merging.sampler.kernel_size)
                if tuple(merging.sampler.stride) != kernel:
                    raise NotImplementedError(
                        'SPT pooling has stride = patch size; this '
                        f'PatchMerging has kernel {kernel} and stride '
                        f'{tuple(merging.sampler.stride)}.')
                cfg = dict(in_channels=merging.in_channels,
                           out_channels=merging.out_channels,
                           patch_size=kernel, padding=getattr(
                               merging.adaptive_padding, 'padding', None))
                stage.downsample = ShiftedPatchTokenization(
                    **dict(cfg, **spt_cfg))
        if use_lsa:
            for stage in self.stages:
                for block in stage.blocks:
                    block.attn.w_msa = LocalityWindowMSA.from_window_msa(
                        block.attn.w_msa, **lsa_cfg)
        self._freeze_stages()  # freeze the swapped-in modules too
