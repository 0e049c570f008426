# Copyright (c) tlalign_mm contributors. All rights reserved.
"""Adversarial robustness of an ImageNet checkpoint under AutoAttack.

AutoAttack (Croce & Hein, ICML 2020) is the ``pyautoattack`` package
(fra31/auto-attack's APGD, FAB and Square under a refactored front end);
nothing of it is reimplemented here. The classifier is built from CONFIG
and loaded (strictly) from CKPT; the images are a seeded random subset of
``--num-images`` of the config's test dataloader (``configs/tlalign``: the
ImageNet val set). The attacks perturb images in [0, 1] pixel space with an
eps ball in that space; the classifier's own ``ClsDataPreprocessor``
normalisation runs inside the attacked function
(:class:`PixelSpaceClassifier`), so the gradient flows through it.

Examples::

    python tools/robustness/autoattack.py \\
        configs/tlalign/deit-small_4xb256-tlalign_in1k.py \\
        work_dirs/deit-small_4xb256-tlalign_in1k/epoch_300.pth \\
        --norm Linf --eps 1/255 --num-images 1000 --device cuda

Writes ``autoattack_<norm>_eps<eps>_<version>.json`` under the work dir
(default ``work_dirs/autoattack/<config>``): clean and robust top-1 (%),
with Wilson 95% intervals (SciPy) over the attacked images.
"""
import argparse
import datetime
import os
import os.path as osp
import sys
import time
from fractions import Fraction
from importlib.metadata import version as package_version

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from mmengine.config import DictAction  # noqa: E402
from mmengine.registry import DATASETS  # noqa: E402
from mmengine.runner import Runner  # noqa: E402
from mmengine.utils import track_iter_progress  # noqa: E402
from scipy.stats import binomtest  # noqa: E402

import tlalign_mm  # noqa: E402,F401  (registers modules)
from tlalign_mm.analysis.session import (  # noqa: E402
    build_model,
    dataloader_cfg,
    load_config,
    write_json,
)
from tlalign_mm.checkpoint import install, run_tool  # noqa: E402

#: the attacks ``--version custom`` can list (``AutoAttack(attacks=...)``)
ATTACKS = ('apgd-ce', 'apgd-dlr', 'fab', 'square', 'apgd-t', 'fab-t')


class PixelSpaceClassifier(nn.Module):
    """``classifier`` on images in ``[0, 1]``: ``forward(x)`` is
    ``classifier((255 * x - mean) / std, mode='tensor')`` with its
    ``ClsDataPreprocessor``'s ``mean`` / ``std`` (RGB after ``to_rgb``),
    i.e. its test-time preprocessing of a uint8 batch divided by 255. The
    classifier is put in eval mode with frozen parameters."""

    def __init__(self, classifier: nn.Module):
        super().__init__()
        from mmpretrain.models.utils import ClsDataPreprocessor
        pre = getattr(classifier, 'data_preprocessor', None)
        if not isinstance(pre, ClsDataPreprocessor):
            raise ValueError("AutoAttack needs mmpretrain's "
                             'ClsDataPreprocessor (the normalisation), got '
                             f'{type(pre).__name__}.')
        if pre.pad_size_divisor > 1:
            raise ValueError(
                f'data_preprocessor.pad_size_divisor={pre.pad_size_divisor}:'
                ' padding is added after normalisation and would be attacked'
                ' as image; use a fixed-size test pipeline and --cfg-options'
                ' model.data_preprocessor.pad_size_divisor=1.')
        self.classifier = classifier.eval().requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.classifier.data_preprocessor
        x = (x * 255 - pre.mean) / pre.std if pre._enable_normalize else \
            x * 255
        logits = self.classifier(x, mode='tensor')
        if not (torch.is_tensor(logits) and logits.dim() == 2):
            raise TypeError("AutoAttack needs (B, K) logits from forward("
                            f"mode='tensor'), got {type(logits).__name__} "
                            f'{getattr(logits, "shape", "")}.')
        return logits


def pixel_batch(pre, data: dict):
    """A collated batch as the attacks see it: ``ClsDataPreprocessor``'s
    first steps (device, BGR -> RGB) and ``/ 255`` instead of the
    normalisation; ``(x (B, C, H, W) in [0, 1], labels (B,))``."""
    inputs = data['inputs']
    if isinstance(inputs, (list, tuple)):
        inputs = torch.stack(list(inputs))
    inputs = inputs.to(pre.device)
    if pre.to_rgb and inputs.size(1) == 3:
        inputs = inputs.flip(1)
    labels = [s.gt_label.reshape(-1)[0] for s in data['data_samples']]
    return inputs.float() / 255, torch.stack(labels).to(inputs.device)


def autoattack_accuracy(model, batches, norm='Linf', eps=4 / 255,
                        version='standard', attacks=None, seed=0) -> dict:
    """Clean and AutoAttack robust top-1 of ``model`` (``[0, 1]`` images
    -> logits) over ``(x, labels)`` batches, each attacked on its own with
    the same seed inside ``torch.random.fork_rng``; every returned image is
    checked to be within ``eps`` and ``[0, 1]``. With fewer than 10
    classes, the targeted attacks target all ``K - 1`` others (AutoAttack
    would index past the logits)."""
    from pyautoattack import AutoAttack
    device = next(model.parameters()).device
    adversary, total, clean, robust, largest = None, 0, 0, 0, 0.0
    start = time.time()
    for x, labels in batches:
        with torch.no_grad():
            logits = model(x)
        if adversary is None:
            adversary = AutoAttack(model, norm=norm, eps=eps, version=version,
                                   seed=seed, device=device, attacks=attacks)
            for attack in (adversary.apgd_targeted, adversary.fab):
                attack.n_target_classes = min(attack.n_target_classes,
                                              logits.shape[1] - 1)
        with torch.random.fork_rng(devices=[device] * (device.type == 'cuda')):
            x_adv, adv_pred = adversary.run_standard_evaluation(
                x, labels, batch_size=len(x))
        distance = torch.linalg.vector_norm(
            (x_adv - x).flatten(1), dim=1,
            ord={'Linf': float('inf'), 'L2': 2, 'L1': 1}[norm]).max().item()
        if distance > eps * (1 + 1e-5) + 1e-6 or not 0 <= x_adv.min() <= \
                x_adv.max() <= 1:
            raise RuntimeError(f'AutoAttack returned images outside the {norm}'
                               f' ball of radius {eps} or outside [0, 1].')
        total, largest = total + len(x), max(largest, distance)
        clean += int((logits.argmax(1) == labels).sum())
        robust += int((adv_pred == labels).sum())
    if not total:
        raise ValueError('No images to attack: the dataloader is empty.')

    def ci95(correct):
        ci = binomtest(correct, total).proportion_ci(method='wilson')
        return [100 * float(ci.low), 100 * float(ci.high)]

    return dict(num_images=total, num_classes=logits.shape[1],
                clean_correct=clean, robust_correct=robust,
                clean_accuracy=100 * clean / total,
                robust_accuracy=100 * robust / total,
                clean_accuracy_ci95=ci95(clean),
                robust_accuracy_ci95=ci95(robust), max_perturbation=largest,
                attacks=list(adversary.attacks_to_run),
                seconds=time.time() - start)


def build_attack_dataloader(cfg, num_images=None, seed=0):
    """The config's test dataloader (else val), unshuffled, on a seeded
    random subset of ``num_images`` images (all of them by default)."""
    loader = dataloader_cfg(cfg, 'test')
    dataset = DATASETS.build(loader['dataset'])
    if num_images is not None and num_images < len(dataset):
        dataset.get_subset_(sorted(np.random.default_rng(seed).choice(
            len(dataset), num_images, replace=False).tolist()))
    loader.update(dataset=dataset, sampler=dict(type='DefaultSampler',
                                                shuffle=False))
    return Runner.build_dataloader(loader)


def parse_eps(text: str) -> float:
    try:
        return float(Fraction(text))
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(
            f'eps must be a number or a fraction like 4/255, got {text!r}')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Clean and AutoAttack robust top-1 of a checkpoint.')
    parser.add_argument('config', help='model config (its test dataloader '
                        'gives the images)')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--eps', type=parse_eps, required=True,
        help='radius in [0, 1] pixel units, e.g. 1/255; no default: the '
        "budget of the paper's Table 6 is not stated, report the one used")
    parser.add_argument('--norm', choices=('Linf', 'L2', 'L1'),
                        default='Linf')
    parser.add_argument('--version', choices=('standard', 'plus', 'rand',
                                              'custom'), default='standard',
                        help="AutoAttack's version (custom: the --attacks)")
    parser.add_argument('--attacks', nargs='+', choices=ATTACKS)
    parser.add_argument('--num-images', type=int, help='a random subset of '
                        'this many images, drawn with --seed (default: all)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the subset and of the attacks')
    parser.add_argument('--work-dir', help='where the JSON goes')
    parser.add_argument('--device', default='cuda' if
                        torch.cuda.is_available() else 'cpu')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override settings of the config (key=value)')
    args = parser.parse_args(argv)
    if (args.version == 'custom') != bool(args.attacks):
        parser.error("--attacks: the attacks to run, only with version="
                     "'custom' (which needs them)")
    if args.num_images is not None and args.num_images < 1:
        parser.error(f'--num-images must be positive, got {args.num_images}')
    return args


def main(argv=None):
    args = parse_args(argv)
    install()  # the checkpoint through tlalign_mm.checkpoint.load
    cfg = load_config(args.config, args.cfg_options)
    classifier = build_model(cfg, args.checkpoint, args.device, args.seed)
    loader = build_attack_dataloader(cfg, args.num_images, args.seed)
    work_dir = args.work_dir or osp.join(
        'work_dirs', 'autoattack', osp.splitext(osp.basename(args.config))[0])
    os.makedirs(work_dir, exist_ok=True)
    batches = (pixel_batch(classifier.data_preprocessor, data) for data in
               track_iter_progress((loader, len(loader))))
    result = autoattack_accuracy(
        PixelSpaceClassifier(classifier), batches, args.norm, args.eps,
        args.version, args.attacks, args.seed)
    record = dict(
        config=args.config, checkpoint=args.checkpoint, norm=args.norm,
        eps=args.eps, version=args.version, seed=args.seed, **result,
        autoattack=f"pyautoattack {package_version('pyautoattack')}",
        device=str(args.device),
        date=datetime.datetime.now().isoformat(timespec='seconds'))
    path = write_json(osp.join(work_dir, f'autoattack_{args.norm}_eps'
                               f'{args.eps:.6g}_{args.version}.json'), record)
    (clo, chi), (rlo, rhi) = (result['clean_accuracy_ci95'],
                              result['robust_accuracy_ci95'])
    print(f"\n{result['num_images']} images: clean top-1 "
          f"{result['clean_accuracy']:.2f}% [{clo:.2f}, {chi:.2f}], robust "
          f"{result['robust_accuracy']:.2f}% [{rlo:.2f}, {rhi:.2f}] (95% "
          f"Wilson intervals; attacks: {', '.join(result['attacks'])})\n"
          f'Wrote {path}')
    return record


if __name__ == '__main__':
    run_tool(main)
