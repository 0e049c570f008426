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
(:mod:`tlalign_mm.downstream.autoattack`), so the gradient flows through
it.

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
from importlib.metadata import version as package_version

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

import torch  # noqa: E402
from mmengine.config import DictAction  # noqa: E402

import tlalign_mm  # noqa: E402,F401  (registers modules)
from tlalign_mm.analysis.session import (  # noqa: E402
    build_model,
    load_config,
    write_json,
)
from tlalign_mm.checkpoint import install  # noqa: E402
from tlalign_mm.downstream.autoattack import (  # noqa: E402
    ATTACKS,
    PixelSpaceClassifier,
    autoattack_accuracy,
    build_attack_dataloader,
    parse_eps,
    pixel_batch,
    print_progress,
)
from tlalign_mm_cli import run_tool  # noqa: E402


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
    batches = (pixel_batch(classifier.data_preprocessor, data)
               for data in loader)
    result = autoattack_accuracy(
        PixelSpaceClassifier(classifier), batches, args.norm, args.eps,
        args.version, args.attacks, args.seed, len(loader), print_progress)
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
