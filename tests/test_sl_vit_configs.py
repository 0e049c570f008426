"""The SPT/LSA configs (configs/sl_vit/) hold the official code's model
settings and mixing (aanna0701/SPT_LSA_ViT main.py, models/vit.py,
models/swin.py), read from the built models and the merged configs."""
import math

import numpy as np
import pytest
import torch
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401

from .test_paper_configs import load

# --------------------------------------------------------------- SL-ViT ---
SL = ['vit', 'sl-vit', 'swin', 'sl-swin']


def _norm_eps(module):
    return {m.eps for m in module.modules()
            if isinstance(m, torch.nn.LayerNorm)}


@pytest.mark.parametrize('model', SL)
def test_sl_models_have_the_official_settings(model):
    """aanna0701/SPT_LSA_ViT: ViT's to_qkv has no bias, Swin's has;
    nn.LayerNorm's eps 1e-5 everywhere; ViT one DropPath(0.1) for every
    block, Swin 0 -> 0.1 over its blocks."""
    cfg = load(f'sl_vit/{model}_1xb128-tlalign_cifar10.py')
    clf = MODELS.build(cfg.model)
    backbone = clf.backbone
    vit = 'vit' in model
    qkv = [m for n, m in backbone.named_modules()
           if n.endswith('qkv') and isinstance(m, torch.nn.Linear)]
    assert qkv and all((m.bias is None) == vit for m in qkv)
    assert _norm_eps(backbone) == {1e-5}
    rates = [m.drop_prob for m in backbone.modules()
             if type(m).__name__ == 'DropPath']
    if vit:
        assert rates and set(rates) == {0.1}
    else:
        assert rates[0] == 0.0 and max(rates) == pytest.approx(0.1)


@pytest.mark.parametrize('model', ['vit', 'swin'])
def test_sl_mixing_draws_follow_the_official_probabilities(model):
    """main.py: r < --mix_prob 0.5 mixes, then CutMix (--beta 1.0) or Mixup
    (--alpha 1.0) with probability 0.5 each: 0.25 / 0.25 / 0.5 none."""
    cfg = load(f'sl_vit/{model}_1xb128-tlalign_cifar10.py')
    clf = MODELS.build(cfg.model)
    batch_aug = clf.data_preprocessor.batch_augments
    assert [(type(a).__name__, a.alpha) for a in batch_aug.augments
            if a is not None] == [('TLMixup', 1.0), ('TLCutMix', 1.0)]
    np.random.seed(0)
    n = 20000
    counts = {}
    inputs = torch.zeros(2, 3, 8, 8)
    scores = torch.eye(2)
    for _ in range(n):
        _, _, record = batch_aug.mix_with_record(inputs, scores)
        counts[record.mode] = counts.get(record.mode, 0) + 1
    # 5 standard deviations of a binomial proportion at n = 20000
    tol = 5 * math.sqrt(0.25 * 0.75 / n)
    assert counts['cutmix'] / n == pytest.approx(0.25, abs=tol)
    assert counts['mixup'] / n == pytest.approx(0.25, abs=tol)
    unmixed = n - counts['cutmix'] - counts['mixup']
    assert unmixed / n == pytest.approx(0.5, abs=tol)


@pytest.mark.parametrize('model', ['sl-vit', 'sl-swin'])
def test_sl_models_train_with_tlalign(model):
    """The official settings (no qkv bias for SL-ViT) through the descriptions:
    a CutMix batch gives a finite loss and aligned targets that sum to 1."""
    from mmpretrain.structures import DataSample
    cfg = load(f'sl_vit/{model}_1xb128-tlalign_cifar10.py')
    cfg.model.data_preprocessor = cfg.data_preprocessor
    torch.manual_seed(0)
    clf = MODELS.build(cfg.model)
    clf.train()
    data = dict(
        inputs=[torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8)
                for _ in range(4)],
        data_samples=[DataSample().set_gt_label(i) for i in range(4)])
    np.random.seed(1)  # with these seeds the batch is CutMix-ed
    torch.manual_seed(1)
    batch = clf.data_preprocessor(data, training=True)
    assert batch['mix'].mode == 'cutmix'
    losses = clf(**batch, mode='loss')
    assert torch.isfinite(losses['loss'])
    scores = torch.stack([s.gt_score for s in batch['data_samples']])
    torch.testing.assert_close(scores.sum(-1), torch.ones(4))


# ---------------------------------------------------------- the data ---
# aanna0701/SPT_LSA_ViT@54bd796 utils/autoaug.py:23-51 and 77-105 (p1, op1,
# magnitude index 1, p2, op2, magnitude index 2), verbatim.
IMAGENET_POLICY = [
    (0.4, 'posterize', 8, 0.6, 'rotate', 9),
    (0.6, 'solarize', 5, 0.6, 'autocontrast', 5),
    (0.8, 'equalize', 8, 0.6, 'equalize', 3),
    (0.6, 'posterize', 7, 0.6, 'posterize', 6),
    (0.4, 'equalize', 7, 0.2, 'solarize', 4),
    (0.4, 'equalize', 4, 0.8, 'rotate', 8),
    (0.6, 'solarize', 3, 0.6, 'equalize', 7),
    (0.8, 'posterize', 5, 1.0, 'equalize', 2),
    (0.2, 'rotate', 3, 0.6, 'solarize', 8),
    (0.6, 'equalize', 8, 0.4, 'posterize', 6),
    (0.8, 'rotate', 8, 0.4, 'color', 0),
    (0.4, 'rotate', 9, 0.6, 'equalize', 2),
    (0.0, 'equalize', 7, 0.8, 'equalize', 8),
    (0.6, 'invert', 4, 1.0, 'equalize', 8),
    (0.6, 'color', 4, 1.0, 'contrast', 8),
    (0.8, 'rotate', 8, 1.0, 'color', 2),
    (0.8, 'color', 8, 0.8, 'solarize', 7),
    (0.4, 'sharpness', 7, 0.6, 'invert', 8),
    (0.6, 'shearX', 5, 1.0, 'equalize', 9),
    (0.4, 'color', 0, 0.6, 'equalize', 3),
    (0.4, 'equalize', 7, 0.2, 'solarize', 4),
    (0.6, 'solarize', 5, 0.6, 'autocontrast', 5),
    (0.6, 'invert', 4, 1.0, 'equalize', 8),
    (0.6, 'color', 4, 1.0, 'contrast', 8),
    (0.8, 'equalize', 8, 0.6, 'equalize', 3),
]
CIFAR10_POLICY = [
    (0.1, 'invert', 7, 0.2, 'contrast', 6),
    (0.7, 'rotate', 2, 0.3, 'translateX', 9),
    (0.8, 'sharpness', 1, 0.9, 'sharpness', 3),
    (0.5, 'shearY', 8, 0.7, 'translateY', 9),
    (0.5, 'autocontrast', 8, 0.9, 'equalize', 2),
    (0.2, 'shearY', 7, 0.3, 'posterize', 7),
    (0.4, 'color', 3, 0.6, 'brightness', 7),
    (0.3, 'sharpness', 9, 0.7, 'brightness', 9),
    (0.6, 'equalize', 5, 0.5, 'equalize', 1),
    (0.6, 'contrast', 7, 0.6, 'sharpness', 5),
    (0.7, 'color', 7, 0.5, 'translateX', 8),
    (0.3, 'equalize', 7, 0.4, 'autocontrast', 8),
    (0.4, 'translateY', 3, 0.2, 'sharpness', 6),
    (0.9, 'brightness', 6, 0.2, 'color', 8),
    (0.5, 'solarize', 2, 0.0, 'invert', 3),
    (0.2, 'equalize', 0, 0.6, 'autocontrast', 0),
    (0.2, 'equalize', 8, 0.6, 'equalize', 4),
    (0.9, 'color', 9, 0.6, 'equalize', 6),
    (0.8, 'autocontrast', 4, 0.2, 'solarize', 8),
    (0.1, 'brightness', 3, 0.7, 'color', 0),
    (0.4, 'solarize', 5, 0.9, 'autocontrast', 3),
    (0.9, 'translateY', 9, 0.7, 'translateY', 9),
    (0.9, 'autocontrast', 2, 0.8, 'solarize', 3),
    (0.8, 'equalize', 8, 0.1, 'invert', 3),
    (0.7, 'translateY', 9, 0.9, 'autocontrast', 1),
]
# SubPolicy's ranges (autoaug.py:170-185)
RANGES = {
    'shearX': np.linspace(0, 0.3, 10), 'shearY': np.linspace(0, 0.3, 10),
    'translateX': np.linspace(0, 150 / 331, 10),
    'translateY': np.linspace(0, 150 / 331, 10),
    'rotate': np.linspace(0, 30, 10), 'color': np.linspace(0.0, 0.9, 10),
    'posterize': np.round(np.linspace(8, 4, 10), 0).astype(int),
    'solarize': np.linspace(256, 0, 10),
    'contrast': np.linspace(0.0, 0.9, 10),
    'sharpness': np.linspace(0.0, 0.9, 10),
    'brightness': np.linspace(0.0, 0.9, 10),
}
# op -> (the config's transform type, the argument holding the magnitude,
#        direction)
OPS = {
    'shearX': ('Shear', 'magnitude', 'horizontal'),
    'shearY': ('Shear', 'magnitude', 'vertical'),
    'translateX': ('Translate', 'magnitude', 'horizontal'),
    'translateY': ('Translate', 'magnitude', 'vertical'),
    'rotate': ('PILRotate', 'angle', None), 'color': ('PILColorTransform',
                                                      'magnitude', None),
    'posterize': ('Posterize', 'bits', None), 'solarize': ('Solarize', 'thr',
                                                           None),
    'contrast': ('PILContrast', 'magnitude', None),
    'sharpness': ('Sharpness', 'magnitude', None),
    'brightness': ('Brightness', 'magnitude', None),
    'autocontrast': ('AutoContrast', None, None),
    'equalize': ('Equalize', None, None), 'invert': ('Invert', None, None),
}


def _check_op(ours, prob, op, index):
    kind, arg, direction = OPS[op]
    assert ours['type'] == kind and ours['prob'] == prob
    if arg is None:
        return
    want = RANGES[op][index]
    if op == 'rotate':
        # PIL's rotate(+angle) is counter-clockwise: mmcv's -angle, and the
        # original never flips the sign (utils/transforms.py:48-53)
        want = -want
        assert ours['random_negative_prob'] == 0.
    else:
        assert 'random_negative_prob' not in ours  # mmpretrain's 0.5
    # Python floats (float64), magnitudes up to 256: 1e-9 is over 10^4 ulp
    assert ours[arg] == pytest.approx(want, abs=1e-9)
    if direction is not None:
        assert ours['direction'] == direction


@pytest.mark.parametrize('data, policy', [
    ('cifar10', CIFAR10_POLICY), ('cifar100', CIFAR10_POLICY),
    ('tiny-imagenet', IMAGENET_POLICY)])
def test_sl_autoaugment_is_the_originals(data, policy):
    cfg = load(f'sl_vit/vit_1xb128-cutmix_{data}.py')
    aug = {t['type']: t for t in cfg.train_dataloader.dataset.pipeline}
    ours = aug['AutoAugment']['policies']
    # fillcolor 128; the array's channel order for the PIL ops
    assert aug['AutoAugment']['hparams'] == dict(
        pad_val=128, channel_order='bgr' if data == 'tiny-imagenet' else 'rgb')
    assert len(ours) == len(policy)
    for (first, second), (p1, op1, m1, p2, op2, m2) in zip(ours, policy):
        _check_op(first, p1, op1, m1)
        _check_op(second, p2, op2, m2)


# utils/dataloader.py:12, 20, 36
STATS = {
    'cifar10': ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    'cifar100': ((0.5070, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    'tiny-imagenet': ((0.4802, 0.4481, 0.3975), (0.2770, 0.2691, 0.2821)),
}


@pytest.mark.parametrize('data', list(STATS))
def test_sl_pipeline_is_the_originals(data):
    """main.py:169-214: flip, crop (padding 4), AutoAugment, Normalize with
    utils/dataloader.py's statistics, then random erasing (--re 0.25,
    --re_sh 0.4, --re_r1 0.3) filling the mean numbers in normalised
    units."""
    cfg = load(f'sl_vit/vit_1xb128-cutmix_{data}.py')
    mean, std = STATS[data]
    pre = cfg.data_preprocessor
    assert pre.mean == pytest.approx([255 * m for m in mean])
    assert pre.std == pytest.approx([255 * s for s in std])
    types = [t['type'] for t in cfg.train_dataloader.dataset.pipeline]
    assert types[-5:] == ['RandomFlip', 'RandomCrop', 'AutoAugment',
                          'ZhongRandomErasing', 'PackInputs']
    crop = cfg.train_dataloader.dataset.pipeline[-4]
    assert crop.padding == 4 and crop.get('pad_val', 0) == 0
    erase = cfg.train_dataloader.dataset.pipeline[-2]
    assert (erase.erase_prob, erase.min_area_ratio, erase.max_area_ratio,
            erase.min_aspect) == (0.25, 0.02, 0.4, 0.3)
    # the fill normalises to the mean numbers, in the image's channel order
    fill = np.array(erase.fill)
    if pre.get('to_rgb', False):  # BGR images: the preprocessor flips
        fill = fill[::-1]
    normalised = (fill - np.array(pre.mean)) / np.array(pre.std)
    # float64 arithmetic on the config's numbers, values ~0.5: numpy's
    # default rtol 1e-7 is ~10^8 ulp
    np.testing.assert_allclose(normalised, mean, atol=1e-9)


@pytest.mark.parametrize('data, n', [('cifar10', 50000),
                                     ('tiny-imagenet', 100000)])
def test_sl_epoch_is_three_passes(data, n):
    """main.py:221-223: RASampler(N, 128, 1, --ra 3, shuffle=True,
    drop_last=True) gives floor(3 N / 128) iterations: 1171 on CIFAR, 2343
    on Tiny-ImageNet."""
    from mmengine.registry import DefaultScope
    from mmengine.runner import Runner
    cfg = load(f'sl_vit/sl-swin_1xb128-cutmix_{data}.py').train_dataloader
    cfg.update(dataset=list(range(n)), num_workers=0,
               persistent_workers=False)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        loader = Runner.build_dataloader(cfg.to_dict(), seed=0)
    assert len(loader) == 3 * n // 128 == {50000: 1171, 100000: 2343}[n]


# ------------------------------------------------------ the models ---
def _official_swin_params(img, patch, classes, spt, lsa):
    """A hand count of SPT_LSA_ViT's SwinTransformer (models/swin.py,
    create_model.py:33-42): embed 96, depths [2, 6, 4], heads [3, 6, 12],
    window 4, MLP ratio 2."""
    dims, depths, heads, window = [96, 192, 384], [2, 6, 4], [3, 6, 12], 4
    if spt:  # SPT.py: LayerNorm(5 C p p), Linear(5 C p p, dim)
        n = 2 * 15 * patch**2 + (15 * patch**2 + 1) * 96
    else:  # PatchEmbed: Conv2d(3, 96, p) and its LayerNorm
        n = (3 * patch**2 + 1) * 96 + 2 * 96
    n += (img // patch)**2 * 96  # absolute_pos_embed, swin.py:500
    for i, (d, depth, h) in enumerate(zip(dims, depths, heads)):
        block = (2 * d                          # norm1
                 + (2 * window - 1)**2 * h      # relative position table
                 + 3 * d * d + 3 * d + d * d + d  # qkv, proj
                 + (h if lsa else 0)            # LSA's temperature per head
                 + 2 * d                        # norm2
                 + 2 * d * d + 2 * d + 2 * d * d + d)  # Mlp, ratio 2
        n += depth * block
        if i < 2:
            if spt:  # ShiftedPatchTokenization(d, 2d, 2)
                n += 2 * 20 * d + (20 * d + 1) * 2 * d
            else:  # PatchMerging: LayerNorm(4d), Linear(4d, 2d, no bias)
                n += 2 * 4 * d + 4 * d * 2 * d
    return n + 2 * 384 + 384 * classes + classes  # norm, head


def _official_vit_params(img, patch, classes, spt, lsa):
    """A hand count of SPT_LSA_ViT's ViT (models/vit.py, create_model.py:
    8-12): dim 192, depth 9, 12 heads of 16, MLP ratio 2."""
    d, tokens = 192, (img // patch)**2
    if spt:
        n = 2 * 15 * patch**2 + (15 * patch**2 + 1) * d
    else:  # Linear(3 p p, dim) on flattened patches
        n = (3 * patch**2 + 1) * d
    n += (tokens + 1) * d + d  # pos_embedding, cls_token
    layer = (2 * d + 3 * d * d + d * d + d + (12 if lsa else 0)
             + 2 * d + 2 * d * d + 2 * d + 2 * d * d + d)
    return n + 9 * layer + 2 * d + d * classes + classes  # mlp_head


@pytest.mark.parametrize('model', SL)
@pytest.mark.parametrize('data, img, classes', [
    ('cifar10', 32, 10), ('tiny-imagenet', 64, 200)])
def test_sl_models_have_the_officials_parameters(model, data, img, classes):
    cfg = load(f'sl_vit/{model}_1xb128-cutmix_{data}.py')
    clf = MODELS.build(cfg.model)
    sl = model.startswith('sl-')
    if 'swin' in model:
        patch = 2 if img == 32 else 4  # create_model.py:38
        # swin.py:500-501, 545: always created and added
        assert clf.backbone.use_abs_pos_embed
        assert clf.backbone.absolute_pos_embed.shape == (
            1, (img // patch)**2, 96)
        want = _official_swin_params(img, patch, classes, sl, sl)
    else:
        patch = 4 if img == 32 else 8  # create_model.py:9
        want = _official_vit_params(img, patch, classes, sl, sl)
    assert sum(p.numel() for p in clf.parameters()) == want


def _std_tol(n, sigma):
    """5 standard errors of a sample std of n normal draws."""
    return 5 * sigma / math.sqrt(2 * n)


def _is_normal(w, sigma):
    """Mean 0, std sigma and a normal's tail: P(|x| > 2 sigma) = 0.0455
    (a uniform of that std has none beyond 1.73 sigma), each to 5 standard
    errors of n draws."""
    w = w.detach().flatten().double()
    n = w.numel()
    tail = (w.abs() > 2 * sigma).double().mean().item()
    return (abs(w.mean().item()) < 5 * sigma / math.sqrt(n)
            and abs(w.std().item() - sigma) < _std_tol(n, sigma)
            and abs(tail - 0.0455) < 5 * math.sqrt(0.0455 * 0.9545 / n))


@pytest.mark.parametrize('model', ['vit', 'sl-vit'])
def test_sl_vit_is_initialised_as_the_official(model):
    """models/vit.py:14-21, 155: xavier-normal Linear (and, for the plain
    ViT, the patch projection as the Linear(3 p p, dim) it is there), zero
    biases, LayerNorm 1 / 0; lines 143-145: randn position embedding and
    class token."""
    cfg = load(f'sl_vit/{model}_1xb128-cutmix_cifar10.py')
    torch.manual_seed(0)
    clf = MODELS.build(cfg.model)
    clf.init_weights()
    backbone = clf.backbone
    assert _is_normal(backbone.pos_embed, 1.)
    cls = backbone.cls_token.detach()
    assert abs(cls.std().item() - 1) < _std_tol(cls.numel(), 1.)
    linears = [m for m in clf.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 9 * 4 + 1 + (model == 'sl-vit')
    for m in linears:
        sigma = math.sqrt(2 / (m.in_features + m.out_features))
        assert _is_normal(m.weight, sigma), m
        assert m.bias is None or not m.bias.any()
    if model == 'vit':
        conv = backbone.patch_embed.projection
        assert _is_normal(conv.weight, math.sqrt(2 / (3 * 16 + 192)))
        assert not conv.bias.any()
    for m in clf.modules():
        if isinstance(m, torch.nn.LayerNorm):
            assert (m.weight == 1).all() and not m.bias.any()


@pytest.mark.parametrize('model', ['swin', 'sl-swin'])
def test_sl_swin_is_initialised_as_the_official(model):
    """models/swin.py initialises nothing itself: PyTorch's default Linear
    (uniform in +-1/sqrt(fan_in)), truncated normal 0.02 for the absolute
    and relative position tables (lines 501, 115)."""
    cfg = load(f'sl_vit/{model}_1xb128-cutmix_cifar10.py')
    torch.manual_seed(0)
    clf = MODELS.build(cfg.model)
    clf.init_weights()
    for m in clf.modules():
        if isinstance(m, torch.nn.Linear):
            bound = 1 / math.sqrt(m.in_features)
            w = m.weight.detach()
            assert w.abs().max() <= bound
            sigma = bound / math.sqrt(3)
            assert abs(w.std().item() - sigma) < 5 * sigma / math.sqrt(
                w.numel()), m  # a uniform's std: SE < sigma / sqrt(n)
            if m.bias is not None:
                assert m.bias.abs().max() <= bound and m.bias.any()
    # timm's trunc_normal_(std=.02) cuts at +-2 (absolute): a plain normal
    assert _is_normal(clf.backbone.absolute_pos_embed, 0.02)
