# Copyright (c) tlalign_mm contributors. All rights reserved.
"""Layer-wise mixing ratio of the classified token (the paper's Fig. 4).

For CutMix pairs of the config's test images, the share of image 1 in the
token the model classifies is estimated after every block from feature
similarity (the mixed image's token against the same token of the two
unmixed images), and compared with the CutMix ratio (fixed), TransMix's
ratio (class-token ViTs) and TL-Align's per-block label. See
:mod:`tlalign_mm.analysis.mixing_ratio`.

Examples::

    python tools/analysis/mixing_ratio.py \\
        configs/tlalign/deit-small_4xb256-tlalign_in1k.py tlalign.pth \\
        --num-images 256

Writes ``mixing_ratio.csv`` (per block: the mean of each series and its
mean absolute gap to the similarity ratio), ``mixing_ratio_images.csv``
(every image and block), ``mixing_ratio.json`` and ``mixing_ratio.png``.
"""
import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

import torch  # noqa: E402

import tlalign_mm  # noqa: E402,F401  (registers modules)
from tlalign_mm.analysis import figures  # noqa: E402
from tlalign_mm.analysis.cli import (  # noqa: E402
    add_common_args,
    open_analysis,
    work_dir_for,
)
from tlalign_mm.analysis.mixing_ratio import mixing_ratios  # noqa: E402
from tlalign_mm.analysis.session import (  # noqa: E402
    write_csv,
    write_json,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Layer-wise mixing ratio: feature similarity vs CutMix, '
        'TransMix and TL-Align.')
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.mix == 'none':
        parser.error('The mixing ratio needs mixed images (--mix cutmix, '
                     'mixup or resizemix).')
    return args


def main(argv=None):
    args = parse_args(argv)
    model, batches = open_analysis(args)
    work_dir = work_dir_for(args, 'mixing_ratio')
    parts = {}
    for batch in batches:
        for key, value in mixing_ratios(model, batch).items():
            parts.setdefault(key, []).append(value.cpu())
    if not parts:
        raise SystemExit('No images.')
    ratios = {k: torch.cat(v) for k, v in parts.items()}
    similarity = ratios['similarity']  # (images, L)
    num_images, L = similarity.shape
    per_block = {k: (v if v.dim() == 2 else v[:, None].expand(-1, L))
                 for k, v in ratios.items()}

    rows, image_rows = [], []
    for layer in range(L):
        row = dict(block=layer + 1)
        for key, value in per_block.items():
            row[key] = float(value[:, layer].mean())
        row['similarity_std'] = float(similarity[:, layer].std()) \
            if num_images > 1 else 0.
        for key, value in per_block.items():
            if key != 'similarity':
                row[f'{key}_gap'] = float(
                    (value[:, layer] - similarity[:, layer]).abs().mean())
        rows.append(row)
        for i in range(num_images):
            image_rows.append(dict(image=i, block=layer + 1, **{
                k: float(v[i, layer]) for k, v in per_block.items()}))

    names = [k for k in ('similarity', 'tlalign', 'cutmix', 'transmix')
             if k in per_block]
    print('\n\nmean share of image 1 (| gap to the similarity ratio |):')
    print('| block | ' + ' | '.join(names) + ' |')
    print('|---' * (len(names) + 1) + '|')
    for r in rows:
        cells = [f"{r[n]:.3f}" + (f" ({r[n + '_gap']:.3f})"
                                  if n != 'similarity' else '')
                 for n in names]
        print(f"| {r['block']} | " + ' | '.join(cells) + ' |')
    summary = {f'{n}_gap': sum(r[f'{n}_gap'] for r in rows) / L
               for n in names if n != 'similarity'}
    outputs = [
        write_csv(osp.join(work_dir, 'mixing_ratio.csv'), rows),
        write_csv(osp.join(work_dir, 'mixing_ratio_images.csv'), image_rows),
        write_json(osp.join(work_dir, 'mixing_ratio.json'),
                   dict(config=args.config, checkpoint=args.checkpoint,
                        mix=args.mix, num_images=num_images,
                        mean_gap_over_blocks=summary, blocks=rows)),
        figures.mixing_ratio_lines(
            {n: per_block[n].mean(0).numpy() for n in names},
            osp.join(work_dir, 'mixing_ratio.png'),
            spread=similarity.std(0).numpy() if num_images > 1 else None),
    ]
    print('Wrote ' + ', '.join(outputs))
    return rows


if __name__ == '__main__':
    main()
