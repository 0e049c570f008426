"""The SPT/LSA configs (configs/sl_vit/) hold the official code's data
pipeline, model settings and initialisation
(aanna0701/SPT_LSA_ViT main.py, models/vit.py, models/swin.py), read from
the merged configs and the built models; the recipe's numbers are in
tests/test_paper_configs.py."""
import math

import numpy as np
import pytest
import torch
from mmengine.registry import TRANSFORMS, DefaultScope
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401

from .test_paper_configs import is_normal, load


def _policy(*subpolicies):
    """``(p1, op1, magnitude index 1, p2, op2, magnitude index 2)`` of each
    ``'p1 op1 m1 p2 op2 m2'``."""
    return [(float(p1), op1, int(m1), float(p2), op2, int(m2))
            for p1, op1, m1, p2, op2, m2 in map(str.split, subpolicies)]


# aanna0701/SPT_LSA_ViT@54bd796 utils/autoaug.py:23-51 and 77-105, in order
IMAGENET_POLICY = _policy(
    '0.4 posterize 8 0.6 rotate 9', '0.6 solarize 5 0.6 autocontrast 5',
    '0.8 equalize 8 0.6 equalize 3', '0.6 posterize 7 0.6 posterize 6',
    '0.4 equalize 7 0.2 solarize 4', '0.4 equalize 4 0.8 rotate 8',
    '0.6 solarize 3 0.6 equalize 7', '0.8 posterize 5 1.0 equalize 2',
    '0.2 rotate 3 0.6 solarize 8', '0.6 equalize 8 0.4 posterize 6',
    '0.8 rotate 8 0.4 color 0', '0.4 rotate 9 0.6 equalize 2',
    '0.0 equalize 7 0.8 equalize 8', '0.6 invert 4 1.0 equalize 8',
    '0.6 color 4 1.0 contrast 8', '0.8 rotate 8 1.0 color 2',
    '0.8 color 8 0.8 solarize 7', '0.4 sharpness 7 0.6 invert 8',
    '0.6 shearX 5 1.0 equalize 9', '0.4 color 0 0.6 equalize 3',
    '0.4 equalize 7 0.2 solarize 4', '0.6 solarize 5 0.6 autocontrast 5',
    '0.6 invert 4 1.0 equalize 8', '0.6 color 4 1.0 contrast 8',
    '0.8 equalize 8 0.6 equalize 3',
)
CIFAR10_POLICY = _policy(
    '0.1 invert 7 0.2 contrast 6', '0.7 rotate 2 0.3 translateX 9',
    '0.8 sharpness 1 0.9 sharpness 3', '0.5 shearY 8 0.7 translateY 9',
    '0.5 autocontrast 8 0.9 equalize 2', '0.2 shearY 7 0.3 posterize 7',
    '0.4 color 3 0.6 brightness 7', '0.3 sharpness 9 0.7 brightness 9',
    '0.6 equalize 5 0.5 equalize 1', '0.6 contrast 7 0.6 sharpness 5',
    '0.7 color 7 0.5 translateX 8', '0.3 equalize 7 0.4 autocontrast 8',
    '0.4 translateY 3 0.2 sharpness 6', '0.9 brightness 6 0.2 color 8',
    '0.5 solarize 2 0.0 invert 3', '0.2 equalize 0 0.6 autocontrast 0',
    '0.2 equalize 8 0.6 equalize 4', '0.9 color 9 0.6 equalize 6',
    '0.8 autocontrast 4 0.2 solarize 8', '0.1 brightness 3 0.7 color 0',
    '0.4 solarize 5 0.9 autocontrast 3', '0.9 translateY 9 0.7 translateY 9',
    '0.9 autocontrast 2 0.8 solarize 3', '0.8 equalize 8 0.1 invert 3',
    '0.7 translateY 9 0.9 autocontrast 1',
)


def _steps(first, last):
    return np.linspace(first, last, 10)


# op -> (the config's transform, the argument holding the magnitude,
# direction, SubPolicy's magnitudes: autoaug.py:170-185)
OPS = {
    'shearX': ('Shear', 'magnitude', 'horizontal', _steps(0, 0.3)),
    'shearY': ('Shear', 'magnitude', 'vertical', _steps(0, 0.3)),
    'translateX': ('Translate', 'magnitude', 'horizontal',
                   _steps(0, 150 / 331)),
    'translateY': ('Translate', 'magnitude', 'vertical',
                   _steps(0, 150 / 331)),
    'rotate': ('PILRotate', 'angle', None, _steps(0, 30)),
    'color': ('PILColorTransform', 'magnitude', None, _steps(0.0, 0.9)),
    'posterize': ('Posterize', 'bits', None,
                  np.round(_steps(8, 4), 0).astype(int)),
    'solarize': ('Solarize', 'thr', None, _steps(256, 0)),
    'contrast': ('PILContrast', 'magnitude', None, _steps(0.0, 0.9)),
    'sharpness': ('Sharpness', 'magnitude', None, _steps(0.0, 0.9)),
    'brightness': ('Brightness', 'magnitude', None, _steps(0.0, 0.9)),
    'autocontrast': ('AutoContrast', None, None, None),
    'equalize': ('Equalize', None, None, None),
    'invert': ('Invert', None, None, None),
}
RANGES = {op: row[3] for op, row in OPS.items() if row[1]}
# utils/dataloader.py:12, 20, 36
STATS = {
    'cifar10': ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    'cifar100': ((0.5070, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    'tiny-imagenet': ((0.4802, 0.4481, 0.3975), (0.2770, 0.2691, 0.2821)),
}


@pytest.mark.parametrize('data', list(STATS))
def test_sl_pipeline_is_the_originals(data):
    """main.py:169-214, read from the pipeline and the data preprocessor
    the config builds (as the Runner: the top-level data_preprocessor goes
    to the model): flip, crop, the AutoAugment policy (fill 128, mmcv's
    -angle for PIL's counter-clockwise rotate, never negated:
    utils/transforms.py:48-53; the PIL ops told the dataset's channel
    order), Normalize with the dataset's statistics, random erasing filling
    the mean numbers in normalised units (the crop's and the erasing's
    settings: the SL row of test_paper_configs' CLAIMS)."""
    cfg = load(f'sl_vit/vit_1xb128-cutmix_{data}.py')
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        pipeline = [TRANSFORMS.build(t)
                    for t in cfg.train_dataloader.dataset.pipeline]
        model = dict(cfg.model)
        model.setdefault('data_preprocessor', cfg.data_preprocessor)
        pre = MODELS.build(model).data_preprocessor
    assert [type(t).__name__ for t in pipeline[-5:]] == [
        'RandomFlip', 'RandomCrop', 'HParamsAutoAugment',
        'ZhongRandomErasing', 'PackInputs']
    _, _, aug, erase, _ = pipeline[-5:]
    policy = IMAGENET_POLICY if data == 'tiny-imagenet' else CIFAR10_POLICY
    ours = [op for sub in aug.transforms for op in sub.transforms]
    theirs = [op for p1, o1, m1, p2, o2, m2 in policy
              for op in ((p1, o1, m1), (p2, o2, m2))]
    # mmpretrain's CIFAR arrays are RGB, LoadImageFromFile's BGR
    # (tests/datasets/test_pil_augment.py reads them from the datasets)
    order = 'bgr' if data == 'tiny-imagenet' else 'rgb'
    for op, (prob, name, index) in zip(ours, theirs, strict=True):
        kind, arg, direction, steps = OPS[name]
        assert (type(op).__name__, op.prob, getattr(
            op, 'direction', None)) == (kind, prob, direction)
        assert getattr(op, 'pad_val', 128) == 128, op
        assert getattr(op, 'channel_order', order) == order, op
        if arg is not None:
            want = -steps[index] if name == 'rotate' else steps[index]
            # float64 from the same linspace: a few ulp (1e-9 is 10^4 ulp)
            assert getattr(op, arg) == pytest.approx(want, abs=1e-9), op
            # a sign drawn 50/50 where the original draws one (shear,
            # translate and the enhancements); none for rotate, posterize
            # and solarize (mmpretrain's Posterize and Solarize draw none)
            assert op.random_negative_prob == (
                0. if name in ('rotate', 'posterize', 'solarize') else 0.5), op
    mean, std = STATS[data]
    # float32 buffers of products of 4-digit constants by 255
    assert pre.mean.flatten().tolist() == pytest.approx(
        [255 * m for m in mean], rel=1e-6)
    assert pre.std.flatten().tolist() == pytest.approx(
        [255 * s for s in std], rel=1e-6)
    bgr = pre.to_rgb  # flips BGR arrays before normalising
    assert bgr == (order == 'bgr')
    fill = np.array(erase.fill)[::-1 if bgr else 1]
    mean255, std255 = (pre.mean.flatten().double().numpy(),
                       pre.std.flatten().double().numpy())
    np.testing.assert_allclose((fill - mean255) / std255, mean, rtol=0,
                               atol=1e-6)  # float32 statistics: values ~0.5


def _official_swin_params(img, patch, classes, sl):
    """A hand count of SPT_LSA_ViT's SwinTransformer (models/swin.py,
    create_model.py:33-42): embed 96, depths [2, 6, 4], heads [3, 6, 12],
    window 4, MLP ratio 2; absolute position embedding (swin.py:500)."""
    if sl:  # SPT.py: LayerNorm(5 C p p), Linear(5 C p p, dim)
        n = 2 * 15 * patch**2 + (15 * patch**2 + 1) * 96
    else:  # PatchEmbed: Conv2d(3, 96, p) and its LayerNorm
        n = (3 * patch**2 + 1) * 96 + 2 * 96
    n += (img // patch)**2 * 96
    for i, (d, depth, h) in enumerate(zip([96, 192, 384], [2, 6, 4],
                                          [3, 6, 12])):
        n += depth * (2 * d + 7**2 * h  # norm1, relative position table
                      + 4 * d * d + 4 * d + (h if sl else 0)  # qkv, proj, LSA
                      + 2 * d + 4 * d * d + 3 * d)  # norm2, Mlp
        if i < 2 and sl:  # ShiftedPatchTokenization(d, 2d, 2)
            n += 2 * 20 * d + (20 * d + 1) * 2 * d
        elif i < 2:  # PatchMerging: LayerNorm(4d), Linear(4d, 2d, no bias)
            n += 2 * 4 * d + 4 * d * 2 * d
    return n + 2 * 384 + 385 * classes  # norm, head


def _official_vit_params(img, patch, classes, sl):
    """A hand count of SPT_LSA_ViT's ViT (models/vit.py, create_model.py:
    8-12): dim 192, depth 9, 12 heads of 16, MLP ratio 2."""
    d, tokens = 192, (img // patch)**2
    n = 2 * 15 * patch**2 + (15 * patch**2 + 1) * d if sl else \
        (3 * patch**2 + 1) * d  # SPT, or Linear(3 p p, dim)
    n += (tokens + 1) * d + d  # pos_embedding, cls_token
    layer = (2 * d + 4 * d * d + d + (12 if sl else 0)  # norm, qkv, out, LSA
             + 2 * d + 4 * d * d + 3 * d)  # norm, FeedForward
    return n + 9 * layer + 2 * d + (d + 1) * classes  # mlp_head


@pytest.mark.parametrize('model', ['vit', 'sl-vit', 'swin', 'sl-swin'])
@pytest.mark.parametrize('data, img, classes', [
    ('cifar10', 32, 10), ('tiny-imagenet', 64, 200)])
def test_sl_models_are_the_officials(model, data, img, classes):
    """The official parameter count (ViT's to_qkv has no bias, Swin's has:
    3 d a block in the count);
    nn.LayerNorm's eps 1e-5; ViT one DropPath(0.1) for every block, Swin
    0 -> 0.1 over its blocks. Initialised as the official (on CIFAR-10;
    the dataset changes no initialiser): ViT (models/vit.py:14-21,
    143-145, 155) xavier-normal Linear (the plain ViT's patch projection
    too, the Linear(3 p p, dim) it is there), zero biases, LayerNorm 1 /
    0, randn position embedding and class token. Swin (models/swin.py)
    initialises nothing itself: PyTorch's Linear (uniform in
    +-1/sqrt(fan_in)), truncated normal 0.02 for the absolute position
    table (line 501), timm's cut at +-2: a normal."""
    torch.manual_seed(0)
    clf = MODELS.build(load(f'sl_vit/{model}_1xb128-cutmix_{data}.py').model)
    vit = 'vit' in model
    count = _official_vit_params if vit else _official_swin_params
    patch = (4 if vit else 2) * img // 32  # create_model.py:9, 38
    assert sum(p.numel() for p in clf.parameters()) == count(
        img, patch, classes, model.startswith('sl-'))
    assert {m.eps for m in clf.modules()
            if isinstance(m, torch.nn.LayerNorm)} == {1e-5}
    rates = [m.drop_prob for m in clf.modules()
             if type(m).__name__ == 'DropPath']
    assert (set(rates) == {0.1}) if vit else (
        rates[0] == 0.0 and max(rates) == pytest.approx(0.1))
    if data != 'cifar10':
        return
    clf.init_weights()
    backbone = clf.backbone
    linears = [m for m in clf.modules() if isinstance(m, torch.nn.Linear)]
    if not vit:
        assert is_normal(backbone.absolute_pos_embed, 0.02)
        for m in linears:
            bound = 1 / math.sqrt(m.in_features)
            w = m.weight.detach()
            # a uniform's std bound / sqrt(3), its SE below sigma / sqrt(n)
            assert w.abs().max() <= bound and abs(w.std().item() - bound / (
                3 ** .5)) < 5 * bound / math.sqrt(3 * w.numel()), m
        return
    assert is_normal(backbone.pos_embed, 1.)
    assert abs(backbone.cls_token.std().item() - 1) < 5 / math.sqrt(2 * 192)
    assert len(linears) == 9 * 4 + 1 + (model == 'sl-vit')
    if model == 'vit':
        linears.append(backbone.patch_embed.projection)  # a Conv2d
    for m in linears:
        fan_in = m.weight[0].numel()
        assert is_normal(m.weight, math.sqrt(2 / (fan_in + len(m.weight))))
        assert m.bias is None or not m.bias.any()
    assert all((m.weight == 1).all() and not m.bias.any()
               for m in clf.modules() if isinstance(m, torch.nn.LayerNorm))
