"""tools/robustness/autoattack.py on a tiny model and tiny data: the
normalisation runs inside the attacked function, eps 0 leaves the accuracy
unchanged, a large eps does not raise it, and the tool writes its JSON.

The attacks are pyautoattack's; here they run on few, tiny images, and,
where the ``standard`` version would run every attack to its end (eps 0:
nothing is ever fooled), as ``custom`` with APGD-CE only. A refused
checkpoint is one ``error:`` line: test_export.py's
``test_a_refused_file_is_one_line_and_debug_shows_the_traceback``."""
import json
import logging
import os.path as osp

import pytest
import torch
from mmengine.registry import init_default_scope
from mmpretrain.structures import DataSample

import tlalign_mm  # noqa: F401  (registers modules)
from tests.cli import tool_main
from tlalign_mm.analysis.session import build_model, load_config
from tlalign_mm.datasets import synthetic
from tlalign_mm.downstream.autoattack import (
    PixelSpaceClassifier,
    autoattack_accuracy,
    build_attack_dataloader,
    parse_eps,
    pixel_batch,
)

from .tiny import config_path, make_pretrain_checkpoint, tiny_config

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
# with eps 0 nothing is ever fooled, so every attack runs to its end: the
# eps-0 runs use the cheapest one
CHEAP = ['apgd-ce']


@pytest.fixture(autouse=True)
def few_steps_and_quiet(monkeypatch, caplog):
    """Every attack with 5 iterations (Square: 20 queries) instead of 100
    (5000): these tests check what the tool does with the attacks and
    their results, not the attacks' strength. AutoAttack's own warnings
    (e.g. zero gradients) are kept out of the output."""
    import pyautoattack

    class FewSteps(pyautoattack.AutoAttack):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            for attack in (self.apgd, self.apgd_targeted, self.fab):
                attack.n_iter = 5
            self.square.n_queries = 20

    monkeypatch.setattr(pyautoattack, 'AutoAttack', FewSteps)
    caplog.set_level(logging.ERROR, logger='auto-attack')  # restored after


def tiny_classifier(num_classes: int = 10):
    """An mmpretrain ViT classifier on 16x16 images, weights perturbed so
    that no logit ties (the head initialises to zero)."""
    from mmpretrain.registry import MODELS
    init_default_scope('mmpretrain')
    model = MODELS.build(dict(
        type='ImageClassifier',
        backbone=dict(type='VisionTransformer', img_size=16, patch_size=8,
                      arch=dict(embed_dims=16, num_layers=1, num_heads=2,
                                feedforward_channels=32)),
        head=dict(type='VisionTransformerClsHead', num_classes=num_classes,
                  in_channels=16),
        data_preprocessor=dict(type='ClsDataPreprocessor', mean=MEAN,
                               std=STD, to_rgb=True)))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=generator))
    return model.eval()


def uint8_batch(n: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    return dict(inputs=torch.randint(0, 256, (n, 3, 16, 16),
                                     generator=generator, dtype=torch.uint8),
                data_samples=[DataSample().set_gt_label(0)] * n)


def half_right(n: int):
    """The tiny classifier in pixel space, ``n`` images, and labels: its
    prediction for the first half, another class for the rest, so that
    clean accuracy is exactly 50%."""
    model = PixelSpaceClassifier(tiny_classifier())
    x, _ = pixel_batch(model.classifier.data_preprocessor, uint8_batch(n))
    with torch.no_grad():
        labels = model(x).argmax(1)
    labels[n // 2:] = (labels[n // 2:] + 1) % 10
    return model, x, labels


def test_normalisation_runs_inside_the_attacked_function():
    classifier = tiny_classifier()
    batch = uint8_batch(4)
    x, labels = pixel_batch(classifier.data_preprocessor, batch)
    # [0, 1] RGB: the BGR-loaded uint8 batch flipped and divided by 255
    assert torch.equal(x, batch['inputs'].flip(1).float() / 255)
    assert labels.tolist() == [0, 0, 0, 0]
    model = PixelSpaceClassifier(classifier)
    with torch.no_grad():
        standard = classifier(
            classifier.data_preprocessor(batch)['inputs'], mode='tensor')
        ours = model(x)
    # logits up to ~7: 1e-5 is over 20 float32 ulp (4.8e-7 at 7); the two
    # normalise x * 255 and the uint8 pixels, a rounding apart
    torch.testing.assert_close(ours, standard, rtol=0, atol=1e-5)
    # the gradient reaches the pixels through the normalisation
    x.requires_grad_(True)
    model(x).sum().backward()
    assert x.grad.abs().sum() > 0
    assert not any(p.requires_grad for p in classifier.parameters())
    classifier.forward = lambda x, mode: x  # (B, C, H, W), not (B, K)
    with pytest.raises(TypeError, match=r'\(B, K\) logits'):
        PixelSpaceClassifier(classifier)(torch.zeros(1, 3, 4, 4))
    classifier.data_preprocessor.pad_size_divisor = 32
    with pytest.raises(ValueError, match='pad_size_divisor=1'):
        PixelSpaceClassifier(classifier)


@pytest.mark.e2e  # seconds of attacks
def test_eps_zero_keeps_clean_accuracy_and_reports_progress():
    model, x, labels = half_right(4)
    events = []
    # two batches, one right and one wrong image each
    result = autoattack_accuracy(model, [(x[0::2], labels[0::2]),
                                         (x[1::2], labels[1::2])],
                                 norm='Linf', eps=0.0, version='custom',
                                 attacks=CHEAP, num_batches=2,
                                 progress=events.append)
    # progress after each attack of each batch (on the images still
    # robust), then after the batch (running totals)
    assert [(e['batch'], e['attack'], e['images']) for e in events] == [
        (1, 'apgd-ce', 1), (1, None, 2), (2, 'apgd-ce', 1), (2, None, 4)]
    assert [e['robust'] for e in events if e['attack'] is None] == [1, 2]
    # an estimate while work is left; none left after batch 2's attack
    assert [e['left'] > 0 for e in events] == [True, True, False, False]
    assert result['num_images'] == 4 and result['num_classes'] == 10
    assert result['clean_correct'] == result['robust_correct'] == 2
    assert result['clean_accuracy'] == result['robust_accuracy'] == 50
    assert result['max_perturbation'] == 0
    assert result['attacks'] == CHEAP
    # 5 classes: AutoAttack's targeted attacks would try 9 runner-up
    # classes, indexing past the logits; nothing fooled, every one tried
    model = PixelSpaceClassifier(tiny_classifier(5))
    labels = model(x[:1]).argmax(1)
    result = autoattack_accuracy(model, [(x[:1], labels)], eps=0.0,
                                 version='custom', attacks=['apgd-t', 'fab-t'])
    assert result['robust_accuracy'] == result['clean_accuracy'] == 100


@pytest.mark.e2e  # seconds of attacks
def test_large_eps_is_no_better_than_clean():
    model, x, labels = half_right(6)
    # two batches: counts add up over batches
    result = autoattack_accuracy(model, [(x[:4], labels[:4]),
                                         (x[4:], labels[4:])], eps=1.0)
    assert result['attacks'] == ['apgd-ce', 'apgd-t', 'fab-t', 'square']
    assert result['num_images'] == 6 and result['clean_correct'] == 3
    # scipy's Wilson 95% interval of 3 of 6: 0.5 -+ 0.3124
    assert result['clean_accuracy_ci95'] == pytest.approx([18.76, 81.24],
                                                          abs=0.01)
    # at this budget the attack changes every decision it may change
    assert result['robust_correct'] == 0
    assert 0 < result['max_perturbation'] <= 1.0 * (1 + 1e-5)


# --------------------------------------------------------------------------
# tools/robustness/autoattack.py on a real ImageNet config
# --------------------------------------------------------------------------
PRETRAIN = config_path('tlalign', 'deit-tiny_4xb256-tlalign_in1k.py')


@pytest.mark.e2e
def test_tool_writes_the_json(tmp_path):
    """The real DeiT-T TL-Align config with the tiny arch at 1/7 scale, a
    tiny checkpoint, and 5 val images labelled with the model's own
    predictions (clean top-1 = 100% by construction)."""
    ckpt = str(tmp_path / 'epoch_300.pth')
    make_pretrain_checkpoint(PRETRAIN, ckpt)
    root = synthetic.write_imagenet(str(tmp_path / 'imagenet'), 0, 5)
    cfg = tiny_config(PRETRAIN, root, 7, str(tmp_path / 'work'))
    config = str(tmp_path / 'deit-tiny_tiny.py')
    cfg.dump(config)
    cfg = load_config(config)
    classifier = build_model(cfg, ckpt)
    loader = build_attack_dataloader(cfg)  # reads val.txt: before it
    with open(osp.join(root, 'meta', 'val.txt'), 'w') as f:
        for data in loader:  # mmpretrain's own predict, not the attacked one
            f.writelines(f'{osp.basename(s.img_path)} {s.pred_label.item()}\n'
                         for s in classifier.test_step(data))

    work = tmp_path / 'aa_work'
    zero = tool_main('robustness/autoattack.py')([
        config, ckpt, '--device', 'cpu', '--work-dir', str(work),
        '--num-images', '4', '--seed', '1', '--eps', '0', '--version',
        'custom', '--attacks', *CHEAP])
    path = work / 'autoattack_Linf_eps0_custom.json'
    assert json.loads(path.read_text()) == json.loads(json.dumps(zero))
    assert zero['num_images'] == 4 and zero['num_classes'] == 1000
    assert zero['clean_accuracy'] == zero['robust_accuracy'] == 100
    assert zero['clean_accuracy_ci95'][1] == 100
    assert (zero['norm'], zero['eps'], zero['seed']) == ('Linf', 0, 1)
    assert zero['autoattack'].startswith('pyautoattack ')


@pytest.mark.parametrize('options, message', [
    ([], '--eps'), (['--eps', '4/0'], 'fraction like 4/255'),
    (['--eps', '1', '--attacks', 'fab'], "only with version='custom'")])
def test_tool_refuses_bad_options(capsys, options, message):
    with pytest.raises(SystemExit):  # the files are parsed, not opened
        tool_main('robustness/autoattack.py')(
            [PRETRAIN, 'epoch_300.pth', *options])
    assert message in capsys.readouterr().err
    assert parse_eps('4/255') == pytest.approx(4 / 255)
