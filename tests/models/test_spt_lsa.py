"""SPT and LSA (Lee et al. 2021) as mmpretrain components against their
definitions (:mod:`.dense`), SL-ViT/SL-Swin switches, checkpoints and
configs. TL-Align through SL-ViT and SL-Swin: ``test_alignment.py``."""
import copy
import glob
import os.path as osp

import pytest
import torch
from mmcv.cnn.bricks.transformer import PatchEmbed, PatchMerging
from mmengine.config import Config
from mmpretrain.models.backbones import VisionTransformer
from mmpretrain.models.utils import MultiheadAttention, WindowMSA
from mmpretrain.registry import DATASETS, MODELS

from tlalign_mm.models import describe
from tlalign_mm.models.spt_lsa import (
    LocalitySelfAttention,
    LocalityWindowMSA,
    ShiftedPatchTokenization,
    spt_token_labels,
)

from . import zoo
from .dense import patch_means, pixel_labels, spt_labels, spt_tokens
from .zoo import in_classes, random_mix

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


@pytest.mark.parametrize('patch,size', [(4, (32, 32)), (4, (30, 27)),
                                        (3, (13, 11)), (2, (7, 9))])
def test_spt_tokens_and_labels_equal_the_definition(patch, size):
    """Tokens: the five shifted views' reads, then the module's LayerNorm
    and Linear, as patch embedding and as pooling of a token map. Labels:
    the mean over every real read of the five views; with
    ``label_views='centre'`` the own patch's mean (a plain patch
    embedding's), which leaves the tokens as they are."""
    torch.manual_seed(0)
    spt = zoo.randomise(MODELS.build(dict(  # (registered)
        type='ShiftedPatchTokenization', embed_dims=24, patch_size=patch)))
    x = torch.randn(2, 3, *size)
    tokens, hw = spt(x)
    ref, ref_hw = spt_tokens(spt, x)
    # float32 against float64 on order-1 features: ~100 ulps of sums
    assert hw == ref_hw and (tokens.double() - ref).abs().max() <= 1e-5
    out, hw = spt(x.flatten(2).transpose(1, 2), size)
    assert hw == ref_hw and (out.double() - ref).abs().max() <= 1e-5
    # not an unshifted patchify: the shift is tested
    plain, centre = (ShiftedPatchTokenization(embed_dims=24, patch_size=patch,
                                              **other) for other in (
        dict(shift_size=0), dict(label_views='centre')))
    for other in (plain, centre):
        other.load_state_dict(spt.state_dict())
    assert (plain(x)[0] - tokens).abs().max() > 1e-2
    assert torch.equal(centre(x)[0], tokens)
    _, pw, targets = random_mix(2, 3, *size)
    pix = pixel_labels(pw, targets)
    five, own = spt_labels(pix, patch, patch // 2), patch_means(pix, patch)
    assert (five - own).abs().max() > 1e-3
    for module, labels in ((spt, five), (centre, own)):  # ulps of <= 1
        ours = in_classes(spt_token_labels(module, pw), targets)
        assert (ours - labels).abs().max() <= 1e-6


def test_bad_label_views_grid_or_map_is_a_clear_error():
    with pytest.raises(ValueError, match='label_views must be one of'):
        ShiftedPatchTokenization(embed_dims=8, label_views='center')
    with pytest.raises(ValueError, match='input_size'):
        ShiftedPatchTokenization(embed_dims=8)(torch.randn(2, 16, 3))
    # mmpretrain's PatchEmbed without padding makes a 7x7 grid of 30x30
    # images; SPT pads (like mmcv's AdaptivePadding) and would make 8x8.
    with pytest.raises(ValueError, match=r'SPT token grid \(8, 8\) differs '
                       r'from the patch embedding it replaces \(\(7, 7\)\)'):
        MODELS.build(dict(zoo.SL_VIT, img_size=30,
                          patch_cfg=dict(padding=0)))


@pytest.mark.parametrize('windowed', [False, True])
def test_lsa_starts_as_the_attention_it_replaces(windowed):
    """Without the diagonal mask, a fresh LSA is the attention it replaces
    (MultiheadAttention, WindowMSA): its scaling and its weights; with the
    mask, it is not. The temperature is trained and in the checkpoint; a
    fixed one is neither a parameter nor in it."""
    torch.manual_seed(0)
    kwargs = dict(embed_dims=24, num_heads=3, **(
        dict(window_size=(3, 3)) if windowed else {}))
    plain = (WindowMSA if windowed else MultiheadAttention)(**kwargs)
    convert = LocalityWindowMSA.from_window_msa if windowed else \
        LocalitySelfAttention.from_multihead_attention
    x = torch.randn(2, 9, 24)
    # outputs of order 1, float32: 1e-6 is 8 ulp (the same ops, regrouped)
    torch.testing.assert_close(convert(plain, diagonal_masking=False)(x),
                               plain(x), atol=1e-6, rtol=0)
    lsa = convert(plain)
    assert (lsa(x) - plain(x)).abs().max() > 1e-3
    lsa(x).square().sum().backward()
    assert 'scale' in lsa.state_dict() and lsa.scale.grad.abs().min() > 0
    fixed = MODELS.build(dict(kwargs, type=type(lsa).__name__,  # registered
                              learnable_temperature=False))
    assert 'scale' not in fixed.state_dict()
    assert 'scale' not in dict(fixed.named_parameters())


@pytest.mark.parametrize('spt', [True, False])
@pytest.mark.parametrize('lsa', [True, False])
def test_switches_swap_only_what_they_name(spt, lsa):
    vit = MODELS.build(dict(zoo.SL_VIT, use_spt=spt, use_lsa=lsa))
    swin = MODELS.build(dict(zoo.SL_SWIN, use_spt=spt, use_lsa=lsa))
    embed = ShiftedPatchTokenization if spt else PatchEmbed
    assert all(isinstance(m.patch_embed, embed) for m in (vit, swin))
    assert all((type(layer.attn) is LocalitySelfAttention) == lsa
               for layer in vit.layers)
    assert all(isinstance(s.downsample, ShiftedPatchTokenization if spt
                          else PatchMerging) for s in swin.stages[:-1])
    assert all(type(b.attn.w_msa) is (LocalityWindowMSA if lsa else
                                      WindowMSA)
               for s in swin.stages for b in s.blocks)
    # The ViT/Swin descriptions state the token size (SPT's patch size, or
    # the embedding conv's stride).
    assert describe(vit).token_size == (4, 4)
    assert describe(swin).token_size == (2, 2)


SL_CONFIGS = sorted(glob.glob(osp.join(ROOT, 'configs', 'sl_vit', '*.py')))
DEMO = [osp.join(ROOT, 'configs', 'demo',
                f'sl-vit-tiny-p4_1xb64-{k}_digits.py')
        for k in ('cutmix', 'tlalign')]


@pytest.mark.parametrize('path', SL_CONFIGS + DEMO, ids=osp.basename)
def test_config_is_the_papers_recipe_and_builds(path):
    """The model the name says (SL- or not, the dataset's image size), its
    head's classes, area augments only, and it builds and describes."""
    cfg = Config.fromfile(path)
    model = copy.deepcopy(cfg.model)
    backbone = model.backbone
    assert model.head.num_classes == cfg.data_preprocessor.num_classes
    augments = [a['type'] for a in model.train_cfg.augments]
    assert not any(a.startswith('TL') for a in augments)
    if path in SL_CONFIGS:  # (the recipe: tests/test_paper_configs.py)
        assert backbone.img_size == (64 if 'tiny-imagenet' in path else 32)
        sl = '/sl-' in path
        assert backbone.type.startswith('SL') == (sl or '/vit_' in path)
        if backbone.type == 'SLViT':
            assert backbone.use_spt == backbone.use_lsa == sl
    backbone.update(arch=(zoo.SL_SWIN if 'Swin' in backbone.type
                          else zoo.SL_VIT)['arch'])
    model.head.in_channels = 96 if 'Swin' in backbone.type else 24
    model.setdefault('data_preprocessor', cfg.data_preprocessor)

    def build():
        torch.manual_seed(0)
        return MODELS.build(copy.deepcopy(model))

    built = build()
    describe(built.backbone)
    if path in DEMO:  # no official init_cfg: SLViT initialises as
        # VisionTransformer.init_weights does, random draws included
        assert backbone.get('init_cfg') is None
        ref = build()
        ref.backbone.init_weights = VisionTransformer.init_weights.__get__(
            ref.backbone)
        for m in (built, ref):
            torch.manual_seed(1)
            m.init_weights()
        got, want = built.state_dict(), ref.state_dict()
        assert got.keys() == want.keys()
        assert all(torch.equal(got[k], want[k]) for k in got)


@pytest.mark.parametrize('base,message', [
    ('cifar10_bs128_sl.py', r'cifar-10-batches-py/\s+data_batch_1'),
    ('cifar100_bs128_sl.py', r'cifar-100-python/\s+train'),
    ('tiny-imagenet_bs128_sl.py', 'train/<wnid>/images'),
])
def test_missing_dataset_names_the_expected_layout(base, message, tmp_path):
    cfg = Config.fromfile(osp.join(ROOT, 'configs', '_base_', 'datasets',
                                   base))
    for loader in (cfg.train_dataloader, cfg.val_dataloader):
        dataset = loader.dataset.copy()
        dataset.data_root = str(tmp_path / 'nowhere')
        with pytest.raises(FileNotFoundError, match=message):
            DATASETS.build(dataset)


def test_tiny_imagenet_flat_val_layout_is_refused(tmp_path):
    root = tmp_path / 'tiny'
    (root / 'val' / 'images').mkdir(parents=True)
    (root / 'val' / 'val_annotations.txt').write_text('val_0.JPEG n0 0 0 1 1')
    with pytest.raises(FileNotFoundError, match='flat validation layout'):
        DATASETS.build(dict(type='TinyImageNet', data_root=str(root),
                            split='val'))
