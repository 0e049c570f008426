# Copyright (c) tlalign_mm contributors. All rights reserved.
"""RMSE between the CutMix target and the TL-Align label (the paper's
Fig. 3), per model.

For every checkpoint, the images of the config's test dataloader are mixed
within each batch (seeded CutMix), and the area label is compared with the
label the model trains on for its class token (or pooled tokens): TL-Align
with the model's own ``align_cfg`` (the default rule for a CutMix model),
TransMix for a ``target='transmix'`` model. See
:mod:`tlalign_mm.analysis.label_rmse` for the numbers.

Examples::

    python tools/analysis/label_rmse.py \\
        configs/tlalign/deit-small_4xb256-cutmix_in1k.py cutmix.pth \\
        configs/tlalign/deit-small_4xb256-tlalign_in1k.py tlalign.pth \\
        --num-images 5000 --work-dir work_dirs/analysis/label_rmse

Writes ``label_rmse.csv``, ``label_rmse.json`` and ``label_rmse.png``.
"""
import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

import tlalign_mm  # noqa: E402,F401  (registers modules)
from tlalign_mm.analysis import figures  # noqa: E402
from tlalign_mm.analysis.cli import (  # noqa: E402
    add_common_args,
    model_pairs,
    open_analysis,
    work_dir_for,
)
from tlalign_mm.analysis.label_rmse import label_rmse  # noqa: E402
from tlalign_mm.analysis.session import (  # noqa: E402
    write_csv,
    write_json,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='RMSE between the CutMix target and the TL-Align label.')
    add_common_args(parser, multi_model=True)
    parser.add_argument('--names', nargs='+',
                        help='a name per model for the table and plot '
                        '(default: config name, checkpoint name)')
    return parser.parse_args(argv)


def model_name(config, checkpoint):
    name = osp.splitext(osp.basename(config))[0]
    if checkpoint and checkpoint.lower() not in ('none', 'random'):
        name += f' ({osp.splitext(osp.basename(checkpoint))[0]})'
    return name


def main(argv=None):
    args = parse_args(argv)
    pairs = model_pairs(args.models)
    names = args.names or [model_name(c, k) for c, k in pairs]
    if len(names) != len(pairs):
        raise SystemExit(f'{len(pairs)} models but {len(names)} --names.')
    work_dir = work_dir_for(args, 'label_rmse')
    rows = []
    for name, (config, checkpoint) in zip(names, pairs):
        print(f'\n{name}')
        model, batches = open_analysis(args, config, checkpoint)
        result = label_rmse(model, batches)
        if not result['num_images']:
            raise SystemExit(f'{config}: no image was analysed; an RMSE of '
                             'no images means nothing.')
        rows.append(dict(model=name, config=config,
                         checkpoint=checkpoint or 'none', mix=args.mix,
                         **result))

    print('\n\n| model | images | RMSE (ratio) | RMSE (class) |')
    print('|---|---|---|---|')
    for row in rows:
        print(f"| {row['model']} | {row['num_images']} | {row['rmse']:.5f} "
              f"| {row['rmse_class']:.5f} |")
    outputs = [
        write_csv(osp.join(work_dir, 'label_rmse.csv'), rows),
        write_json(osp.join(work_dir, 'label_rmse.json'), rows),
        figures.rmse_bars([r['model'] for r in rows],
                          [r['rmse'] for r in rows],
                          osp.join(work_dir, 'label_rmse.png')),
    ]
    print('Wrote ' + ', '.join(outputs))
    return rows


if __name__ == '__main__':
    main()
