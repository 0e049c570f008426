"""The main job: CutMix vs TL-Align on real data that ships with scikit-learn.

Trains the demo configs through ``tools/train.py`` (a tiny ViT and its SL-ViT
twin, with Shifted Patch Tokenization and Locality Self-Attention, on the
handwritten digits, from scratch), each with CutMix and with TL-Align, then
prints the held-out top-1 accuracy of each, with its seed, in one table.

    .venv/bin/python tools/run_demo.py                  # seed 0, all configs
    .venv/bin/python tools/run_demo.py --seeds 0 1 2
"""
import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
# (model, target) -> config
CONFIGS = {
    ('ViT', 'CutMix'): 'configs/demo/vit-tiny-p4_digits_cutmix.py',
    ('ViT', 'TL-Align'): 'configs/demo/vit-tiny-p4_digits_tlalign.py',
    ('SL-ViT', 'CutMix'): 'configs/demo/sl-vit-tiny-p4_digits_cutmix.py',
    ('SL-ViT', 'TL-Align'): 'configs/demo/sl-vit-tiny-p4_digits_tlalign.py',
}


def last_accuracy(work_dir):
    """Top-1 of the last validation in the newest run's scalars.json."""
    runs = sorted(d for d in os.listdir(work_dir)
                  if osp.isfile(osp.join(work_dir, d, 'vis_data',
                                         'scalars.json')))
    if not runs:
        raise RuntimeError(f'No training log under {work_dir}.')
    acc = None
    with open(osp.join(work_dir, runs[-1], 'vis_data', 'scalars.json')) as f:
        for line in f:
            record = json.loads(line)
            if 'accuracy/top1' in record:
                acc = record['accuracy/top1']
    if acc is None:
        raise RuntimeError(f'No validation accuracy in {work_dir}.')
    return acc


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seeds', type=int, nargs='+', default=[0])
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument('--epochs', type=int, default=None,
                        help='override max_epochs (for a quick look)')
    parser.add_argument('--cfg-options', nargs='+', default=[],
                        help='extra overrides passed to tools/train.py')
    args = parser.parse_args()

    os.makedirs(args.work_dir, exist_ok=True)
    rows = []
    for seed in args.seeds:
        for (model, target), config in CONFIGS.items():
            name = f'{model} {target}'
            slug = f'{model}_{target}'.lower()
            work_dir = osp.join(args.work_dir, f'{slug}_seed{seed}')
            options = [f'randomness.seed={seed}'] + args.cfg_options
            if args.epochs:
                options += [f'train_cfg.max_epochs={args.epochs}',
                            f'train_cfg.val_interval={args.epochs}']
            cmd = [sys.executable, osp.join(ROOT, 'tools', 'train.py'),
                   osp.join(ROOT, config), '--work-dir', work_dir,
                   '--cfg-options', *options]
            print(f'[demo] {name}, seed {seed}: {" ".join(cmd[1:])}',
                  flush=True)
            start = time.time()
            log_file = osp.join(args.work_dir, f'{slug}_seed{seed}.log')
            with open(log_file, 'w') as log:
                subprocess.run(cmd, check=True, cwd=ROOT, stdout=log,
                               stderr=subprocess.STDOUT)
            rows.append((model, target, seed, last_accuracy(work_dir),
                         time.time() - start))
            print(f'[demo]   top-1 {rows[-1][3]:.2f}% in {rows[-1][4]:.0f} s',
                  flush=True)

    print('\nHeld-out top-1 accuracy on scikit-learn digits '
          '(360 test images), tiny ViT / SL-ViT from scratch:')
    print(f'| {"model":6s} | {"target":8s} | seed | top-1 (%) | '
          'train time (s) |')
    print('|--------|----------|------|-----------|----------------|')
    for model, target, seed, acc, secs in rows:
        print(f'| {model:6s} | {target:8s} | {seed:4d} | {acc:9.2f} | '
              f'{secs:14.0f} |')
    if len(args.seeds) > 1:
        for model, target in CONFIGS:
            accs = [r[3] for r in rows if r[:2] == (model, target)]
            print(f'| {model:6s} | {target:8s} | mean | '
                  f'{sum(accs) / len(accs):9.2f} | {"":14s} |')


if __name__ == '__main__':
    main()
