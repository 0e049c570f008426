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
    cfg = load(f'sl_vit/{model}_1xb128_cifar10_tlalign.py')
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
    cfg = load(f'sl_vit/{model}_1xb128_cifar10_tlalign.py')
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


@pytest.mark.parametrize('model', SL)
def test_sl_tlalign_twins_differ_only_in_the_target(model):
    ours = load(f'sl_vit/{model}_1xb128_cifar10_tlalign.py').to_dict()
    twin = load(f'sl_vit/{model}_1xb128_cifar10.py').to_dict()
    ours_model, twin_model = ours.pop('model'), twin.pop('model')
    assert ours == twin
    assert ours_model.pop('type') == 'TLAlignClassifier'
    assert twin_model.pop('type') == 'ImageClassifier'
    augs = ours_model['train_cfg'].pop('augments')
    twin_augs = twin_model['train_cfg'].pop('augments')
    assert [a.pop('type') for a in augs] == ['TLMixup', 'TLCutMix']
    assert [a.pop('type') for a in twin_augs] == ['Mixup', 'CutMix']
    assert augs == twin_augs and ours_model == twin_model


@pytest.mark.parametrize('model', ['sl-vit', 'sl-swin'])
def test_sl_models_train_with_tlalign(model):
    """The official settings (no qkv bias for SL-ViT) through the recorders:
    a CutMix batch gives a finite loss and aligned targets that sum to 1."""
    from mmpretrain.structures import DataSample
    cfg = load(f'sl_vit/{model}_1xb128_cifar10_tlalign.py')
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
