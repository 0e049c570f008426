# Copyright (c) tlalign_mm contributors. All rights reserved.
"""Token presence per block (TL-Align, Eq. 2) and its distribution.

The presence of a token entering a block is the sum of its contributions to
the block's attention outputs, ``p(z_i) = sum_j Ā_ji`` (the column sum of the
head-averaged attention). Presences average 1; their spread is the token
fluctuation. See :mod:`tlalign_mm.analysis.presence` for how ``Ā`` is read
off a recorded forward exactly.

Examples::

    python tools/analysis/token_presence.py \\
        configs/tlalign/deit-small_4xb256-tlalign_in1k.py tlalign.pth \\
        --num-images 256

Writes ``presence.csv`` (per block, counted from 1: mean, std, quantiles,
class token), ``presence.json`` (the same), ``presence.npz`` (every value,
``block{i}_patches`` ``(images, N)``, ``block{i}_class_token``) and
``presence.png`` (box plot per block).
"""
import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tlalign_mm  # noqa: E402,F401  (registers modules)
from tlalign_mm.analysis import figures  # noqa: E402
from tlalign_mm.analysis.cli import (  # noqa: E402
    add_common_args,
    open_analysis,
    work_dir_for,
)
from tlalign_mm.analysis.presence import token_presence  # noqa: E402
from tlalign_mm.analysis.session import (  # noqa: E402
    write_csv,
    write_json,
)

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Token presence per block and its distribution.')
    add_common_args(parser)
    return parser.parse_args(argv)


def summarise(values: np.ndarray, extra) -> dict:
    """Statistics of the ``(images, N)`` patch presences of one block and
    the ``(images,)`` class-token presences (or ``None``)."""
    q = np.quantile(values, QUANTILES)
    row = dict(num_tokens=values.shape[1] + int(extra is not None),
               mean=float(values.mean()), std=float(values.std()),
               min=float(values.min()), max=float(values.max()))
    row.update({f'q{int(p * 100):02d}': float(v)
                for p, v in zip(QUANTILES, q)})
    if extra is not None:
        row['class_token_mean'] = float(extra.mean())
    return row


def main(argv=None):
    args = parse_args(argv)
    model, batches = open_analysis(args)
    backbone = model.backbone
    work_dir = work_dir_for(args, 'token_presence')
    patches, extras, grids = None, None, None
    for batch in batches:
        layers = token_presence(backbone, batch.mixed)
        if patches is None:
            patches = [[] for _ in layers]
            extras = [[] for _ in layers]
            grids = [p.grid for p in layers]
        for i, p in enumerate(layers):
            patches[i].append(p.patches.cpu())
            if p.extra is not None:
                extras[i].append(p.extra.cpu())
    if patches is None:
        raise SystemExit('No images.')

    values = [torch.cat(p).numpy() for p in patches]  # (images, N_l)
    extra = [torch.cat(e).numpy() if e else None for e in extras]
    rows = [dict(block=i + 1, **summarise(v, e))  # blocks count from 1
            for i, (v, e) in enumerate(zip(values, extra))]
    print('\n\n| block | tokens | mean | std | min | max | class token |')
    print('|---|---|---|---|---|---|---|')
    for r in rows:
        print(f"| {r['block']} | {r['num_tokens']} | {r['mean']:.3f} | "
              f"{r['std']:.3f} | {r['min']:.3f} | {r['max']:.3f} | "
              f"{r.get('class_token_mean', float('nan')):.3f} |")
    npz = osp.join(work_dir, 'presence.npz')
    np.savez_compressed(
        npz, **{f'block{i}_patches': v for i, v in enumerate(values, 1)},
        **{f'block{i}_class_token': e for i, e in enumerate(extra, 1)
           if e is not None})
    outputs = [
        write_csv(osp.join(work_dir, 'presence.csv'), rows),
        write_json(osp.join(work_dir, 'presence.json'),
                   dict(config=args.config, checkpoint=args.checkpoint,
                        mix=args.mix, num_images=int(values[0].shape[0]),
                        grids=grids, blocks=rows)),
        npz,
        figures.presence_distribution(
            [v.reshape(-1) for v in values],
            osp.join(work_dir, 'presence.png'),
            [float(e.mean()) for e in extra] if extra[0] is not None
            else None),
    ]
    print('Wrote ' + ', '.join(outputs))
    return rows


if __name__ == '__main__':
    main()
