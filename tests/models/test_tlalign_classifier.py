"""TLAlignClassifier: the aligned target in training, ImageClassifier
everywhere else."""
import numpy as np
import pytest
import torch
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from tlalign_mm import align_labels

from .mixes import head_samples

ARCH = dict(embed_dims=48, num_layers=2, num_heads=3, feedforward_channels=96)


def model_cfg(type='TLAlignClassifier', num_classes=5, aug='TLCutMix',
              **backbone):
    return dict(
        type=type,
        backbone=dict(type='VisionTransformer', arch=ARCH, img_size=32,
                      patch_size=8, **backbone),
        head=dict(type='VisionTransformerClsHead', num_classes=num_classes,
                  in_channels=48),
        data_preprocessor=dict(num_classes=num_classes, mean=[127.5] * 3,
                               std=[127.5] * 3),
        train_cfg=dict(augments=[dict(type=aug, alpha=1.0)]))


def fake_batch(batch_size, num_classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return dict(
        inputs=[torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8,
                              generator=g) for _ in range(batch_size)],
        data_samples=[DataSample().set_gt_label(i % num_classes)
                      for i in range(batch_size)])


@pytest.mark.parametrize('batch_size', [1, 3, 4])
def test_loss_uses_the_aligned_label(batch_size):
    torch.manual_seed(0)
    model = MODELS.build(model_cfg())
    model.init_weights()
    model.train()
    np.random.seed(1)
    torch.manual_seed(1)
    batch = model.data_preprocessor(fake_batch(batch_size), training=True)
    samples = batch['data_samples']
    mixed = torch.stack([s.gt_score for s in samples]).clone()
    mix = batch['mix']
    model.backbone.eval()  # no drop-path: a deterministic reference
    expected = align_labels(model.backbone, batch['inputs'],
                            mix.pixel_weights, mix.targets, mix.area_share)
    given = head_samples(model)
    losses = model(**batch, mode='loss')
    assert torch.isfinite(losses['loss'])
    aligned = torch.stack([s.gt_score for s in given])
    torch.testing.assert_close(aligned, expected)
    torch.testing.assert_close(aligned.sum(-1), torch.ones(batch_size))
    if batch_size > 1:  # with a partner image, alignment moves the label
        assert (aligned - mixed).abs().max() > 1e-4
    # ... on fresh samples: the caller's keep the mixed target.
    assert torch.equal(torch.stack([s.gt_score for s in samples]), mixed)
    assert all(a is not b for a, b in zip(given, samples))


def test_predict_is_bit_identical_to_image_classifier():
    torch.manual_seed(0)
    ours = MODELS.build(model_cfg())
    ours.init_weights()
    plain = MODELS.build(model_cfg(type='ImageClassifier', aug='CutMix'))
    assert set(ours.state_dict()) == set(plain.state_dict())
    plain.load_state_dict(ours.state_dict(), strict=True)
    ours.eval()
    plain.eval()
    data = fake_batch(3)
    a = ours.val_step(dict(data))
    b = plain.val_step(dict(data))
    for x, y in zip(a, b):
        assert torch.equal(x.pred_score, y.pred_score)


def test_classifier_checkpoint_loads_into_plain_backbone():
    ours = MODELS.build(model_cfg())
    backbone = MODELS.build(model_cfg()['backbone'])
    state = {k[len('backbone.'):]: v for k, v in ours.state_dict().items()
             if k.startswith('backbone.')}
    missing, unexpected = backbone.load_state_dict(state, strict=True)
    assert not missing and not unexpected


def test_missing_record_is_a_clear_error():
    model = MODELS.build(
        model_cfg(aug='CutMix') | dict(data_preprocessor=dict(
            type='ClsDataPreprocessor', num_classes=5)))
    model.train()
    batch = model.data_preprocessor(fake_batch(2), training=True)
    with pytest.raises(ValueError, match='TLAlignDataPreprocessor'):
        model(**batch, mode='loss')


def test_wrong_num_classes_is_a_clear_error():
    cfg = model_cfg()
    cfg['head']['num_classes'] = 7
    model = MODELS.build(cfg)
    model.train()
    batch = model.data_preprocessor(fake_batch(2), training=True)
    with pytest.raises(ValueError, match='num_classes'):
        model(**batch, mode='loss')


def test_align_cfg_reaches_the_backbone():
    model = MODELS.build(
        model_cfg() | dict(align_cfg=dict(align_layers='last',
                                          residual_norm=False)))
    # The backbone is the plain one; the options are the classifier's.
    assert type(model.backbone).__name__ == 'VisionTransformer'
    assert model.align_cfg.align_layers == 'last'
    assert model.align_cfg.residual_norm is False


BAD_OPTIONS = {
    # --cfg-options model.align_cfg.residual_norm=no gives the string 'no'
    "residual_norm='no'": (dict(residual_norm='no'), TypeError,
                           'residual_norm must be True or False'),
    "residual_norm='yes'": (dict(residual_norm='yes'), TypeError,
                            'residual_norm must be True or False'),
    'follow_drop_path=1': (dict(follow_drop_path=1), TypeError,
                           'follow_drop_path must be True or False'),
    'unknown key': (dict(align_layer='last'), ValueError,
                    r"known: \['align_layers'"),
    'layer out of range': (dict(align_layers=[2]), ValueError,
                           'out of range'),
    # the removed wrapper, with a typo it used to drop silently
    'TLAlignBackbone': ('wrapper', ValueError, 'align_cfg=dict'),
}


@pytest.mark.parametrize('case', list(BAD_OPTIONS))
def test_options_are_checked_at_build(case):
    options, error, match = BAD_OPTIONS[case]
    cfg = model_cfg()
    if options == 'wrapper':
        cfg['backbone'] = dict(type='TLAlignBackbone', align_layer='last',
                               backbone=cfg['backbone'])
    else:
        cfg['align_cfg'] = options
    with pytest.raises(error, match=match):
        MODELS.build(cfg)
