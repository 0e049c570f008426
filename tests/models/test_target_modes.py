"""TLAlignClassifier's target switch: 'cutmix', 'transmix' and 'tlalign' on
the same model and batch, and TransMix against its official definition."""
import math

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from tlalign_mm import align_labels
from tlalign_mm.core.transmix import transmix_lambda

ARCH = dict(embed_dims=48, num_layers=2, num_heads=3, feedforward_channels=96)
PATCH = 8


def model_cfg(target, aug='TLCutMix', backbone=None,
              head='VisionTransformerClsHead', **kwargs):
    return dict(
        type='TLAlignClassifier',
        target=target,
        **kwargs,
        backbone=backbone or dict(type='VisionTransformer', arch=ARCH,
                                  img_size=32, patch_size=PATCH),
        head=dict(type=head, num_classes=5, in_channels=48),
        data_preprocessor=dict(num_classes=5, mean=[127.5] * 3,
                               std=[127.5] * 3),
        train_cfg=dict(augments=[dict(type=aug, alpha=1.0)]))


def build(target, **kwargs):
    torch.manual_seed(0)
    model = MODELS.build(model_cfg(target, **kwargs))
    model.init_weights()
    model.train()
    model.backbone.eval()  # no drop-path: deterministic references
    return model


def mixed_batch(model, batch_size=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    data = dict(
        inputs=[torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8,
                              generator=g) for _ in range(batch_size)],
        data_samples=[DataSample().set_gt_label(i % 5)
                      for i in range(batch_size)])
    np.random.seed(seed)
    torch.manual_seed(seed)
    return model.data_preprocessor(data, training=True)


def record(batch):
    mix = batch['mix']
    return mix.pixel_weights, mix.targets.float(), mix.area_share


def trained_target(model, batch):
    losses = model(**batch, mode='loss')
    assert torch.isfinite(losses['loss']) and losses['loss'].requires_grad
    return torch.stack([s.gt_score for s in batch['data_samples']])


def explicit_attention(vit, images, layer=-1):
    """(B, N, N): block ``layer``'s attention averaged over heads, from an
    explicit softmax of its queries and keys."""
    seen = {}
    attn = vit.layers[layer].attn
    handle = attn.register_forward_pre_hook(
        lambda m, args: seen.setdefault('x', args[0]))
    with torch.no_grad():
        vit(images)
    handle.remove()
    x = seen['x']
    B, N, _ = x.shape
    qkv = attn.qkv(x).reshape(B, N, 3, attn.num_heads, attn.head_dims)
    q, k = qkv.permute(2, 0, 3, 1, 4)[:2]
    return torch.softmax(q @ k.transpose(-2, -1) * attn.head_dims**-0.5,
                         -1).mean(1)


def patch_labels(pixel_weights):
    """(B, S, H, W) -> (B, N, S): mean pixel weight of each patch."""
    B, S, H, W = pixel_weights.shape
    cells = pixel_weights.reshape(B, S, H // PATCH, PATCH, W // PATCH, PATCH)
    return cells.mean((3, 5)).flatten(2).transpose(1, 2)


def official_transmix(attn, pixel_weights, targets):
    """TransMix's target, following Beckschen/TransMix transmix.py
    (``Mixup_transmix.transmix_label``): the pasted box's pixel mask
    nearest-downsampled to the token grid by ``nn.Upsample``, its attention
    share ``lam1`` and its clipped area ``lam0``, averaged.

    attn: (B, N) class-token attention to the patches; pixel_weights:
    (B, 2, H, W) of a CutMix batch (source 1 = the box); targets: (B, 2, C).
    """
    box = pixel_weights[0, 1]
    rows, cols = box.any(1).nonzero().flatten(), box.any(0).nonzero().flatten()
    H, W = box.shape
    if len(rows) == 0:
        return targets[:, 0]
    yl, yh, xl, xh = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    lam0 = (yh - yl) * (xh - xl) / (H * W)
    mask = torch.zeros(H, W)
    mask[yl:yh, xl:xh] = 1
    n = int(math.sqrt(attn.shape[1]))
    mask = torch.nn.Upsample(size=n)(mask[None, None]).int()
    mask = mask.view(1, -1).repeat(len(attn), 1)
    w1, w2 = ((1 - mask) * attn).sum(1), (mask * attn).sum(1)
    lam = (lam0 + w2 / (w1 + w2)) / 2
    return targets[:, 0] * (1 - lam)[:, None] + targets[:, 1] * lam[:, None]


def test_the_three_targets_on_one_model_and_batch():
    cutmix, transmix, tlalign = (build(t) for t in
                                 ('cutmix', 'transmix', 'tlalign'))
    state = tlalign.state_dict()
    cutmix.load_state_dict(state)
    transmix.load_state_dict(state)
    batch = mixed_batch(tlalign)
    inputs = batch['inputs']
    pixel_weights, targets, area_share = record(batch)
    area = torch.einsum('bs,bsc->bc', area_share, targets)
    assert not ((pixel_weights > 0) & (pixel_weights < 1)).any()  # CutMix

    # cutmix: the area target, as the preprocessor mixed it.
    torch.testing.assert_close(trained_target(cutmix, mixed_batch(cutmix)),
                               area)

    # tlalign: align_labels.
    expected = align_labels(tlalign.backbone, inputs, pixel_weights, targets,
                            area_share)
    aligned = trained_target(tlalign, mixed_batch(tlalign))
    torch.testing.assert_close(aligned, expected)

    # transmix: TransMix's own computation from the explicit last-block
    # attention (the class token's row, patch columns).
    vit = transmix.backbone
    attn = explicit_attention(vit, inputs)[:, 0, vit.num_extra_tokens:]
    expected = official_transmix(attn, pixel_weights, targets)
    got = trained_target(transmix, mixed_batch(transmix))
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got.sum(-1), torch.ones(len(got)))
    # ... which is neither of the others.
    assert (got - area).abs().max() > 1e-4
    assert (got - aligned).abs().max() > 1e-4


def test_transmix_is_the_official_target_on_pixel_boxes():
    """Issue 12: on TransMix's own pixel CutMix boxes (cutting through
    patches), target='transmix' is the official target to 1e-6; the
    'fractional' mask (each patch by the share of its pixels in the box)
    is not, and this shows by how much."""
    official = build('transmix')
    fractional = build('transmix', transmix_cfg=dict(mask='fractional'))
    fractional.load_state_dict(official.state_dict())
    assert official.transmix_cfg == dict(mask='nearest')
    vit = official.backbone
    worst = cut = 0.
    for seed in range(1, 9):
        batch = mixed_batch(official, seed=seed)
        pixel_weights, targets, area_share = record(batch)
        cells = patch_labels(pixel_weights)
        cut += bool(((cells > 0) & (cells < 1)).any())
        attn = explicit_attention(vit, batch['inputs'])[
            :, 0, vit.num_extra_tokens:]
        expected = official_transmix(attn, pixel_weights, targets)
        got = trained_target(official, batch)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)

        lam = transmix_lambda(attn, cells, area_share)
        frac = trained_target(fractional,
                              mixed_batch(fractional, seed=seed))
        torch.testing.assert_close(
            frac, torch.einsum('bs,bsc->bc', lam, targets))
        worst = max(worst, (frac - got).abs().max().item())
    assert cut >= 4, 'too few boxes cut through patches'
    # The two rules differ by a few hundredths here (TransMix's attention
    # term itself moves the target by about 0.1).
    assert 0.005 < worst < 0.2, worst


def test_bad_transmix_cfg_is_a_clear_error():
    with pytest.raises(ValueError, match='mask must be one of'):
        MODELS.build(model_cfg('transmix', transmix_cfg=dict(mask='area')))
    with pytest.raises(ValueError, match='Unknown transmix_cfg'):
        MODELS.build(model_cfg('transmix', transmix_cfg=dict(ratio=0.3)))


def test_cutmix_target_trains_as_image_classifier():
    ours = build('cutmix')
    cfg = model_cfg('cutmix', aug='CutMix')
    cfg.pop('target')
    plain = MODELS.build(cfg | dict(type='ImageClassifier'))
    plain.load_state_dict(ours.state_dict())
    plain.train()
    plain.backbone.eval()
    a = ours(**mixed_batch(ours), mode='loss')['loss']
    b = plain(**mixed_batch(plain), mode='loss')['loss']
    assert torch.equal(a, b)


def test_transmix_keeps_the_mixup_target():
    model = build('transmix', aug='TLMixup')
    batch = mixed_batch(model)
    _, targets, area_share = record(batch)
    assert torch.equal(trained_target(model, batch),
                       torch.einsum('bs,bsc->bc', area_share, targets))


def test_transmix_trains_with_drop_path_and_a_distillation_token():
    torch.manual_seed(0)
    model = MODELS.build(model_cfg(
        'transmix',
        backbone=dict(type='DistilledVisionTransformer', arch=ARCH,
                      img_size=32, patch_size=PATCH, drop_path_rate=0.5),
        head='DeiTClsHead'))
    model.train()
    batch = mixed_batch(model)
    losses = model(**batch, mode='loss')
    losses['loss'].backward()
    assert model.backbone.cls_token.grad is not None
    scores = torch.stack([s.gt_score for s in batch['data_samples']])
    torch.testing.assert_close(scores.sum(-1), torch.ones(4))


def test_a_bad_target_is_a_clear_error():
    with pytest.raises(ValueError, match="'tlalign', 'transmix', 'cutmix'"):
        MODELS.build(model_cfg('mixup'))


@pytest.mark.parametrize('backbone', [
    dict(type='SwinTransformer', arch=dict(embed_dims=16, depths=[2, 2],
                                           num_heads=[2, 4]),
         img_size=32, window_size=4, out_indices=(1, )),
    dict(type='VisionTransformer', arch=ARCH, img_size=32, patch_size=PATCH,
         out_type='avg_featmap'),
])
def test_transmix_without_a_class_token_is_a_clear_error(backbone):
    with pytest.raises(ValueError, match='class token'):
        MODELS.build(model_cfg('transmix', backbone=backbone))


def test_deit_small_transmix_config():
    cfg = Config.fromfile('configs/tlalign/deit-small_4xb256-transmix_in1k.py')
    # The CutMix twin's model and recipe (its _base_), TransMix's target.
    assert cfg.model.type == 'TLAlignClassifier'
    assert cfg.model.target == 'transmix'
    assert [a['type'] for a in cfg.model.train_cfg.augments] == [
        'Mixup', 'CutMix']
    assert cfg.model.backbone.arch == 'deit-small'
    assert cfg.train_cfg.max_epochs == 300


@pytest.mark.parametrize('aug', ['TLPatchMix', 'TLResizeMix'])
def test_transmix_keeps_the_patch_and_resize_mix_target(aug):
    # Patch mixing and ResizeMix's pasted box are hard masks too, but
    # TransMix is defined for CutMix boxes only: the record's mode, not the
    # mask, decides.
    model = build('transmix', aug=aug)
    batch = mixed_batch(model)
    assert batch['mix'].mode == aug[2:].lower()
    expected = torch.stack([s.gt_score for s in batch['data_samples']])
    assert torch.equal(trained_target(model, batch), expected)
