# Copyright (c) tlalign_mm contributors. All rights reserved.
"""Label maps of CutMix pairs before and after alignment (the paper's
Fig. 5).

One row per mixed image: image 1, image 2, the mixed image, the initial
token labels and the aligned token labels after the last block, red toward
image 1 and blue toward image 2 (the key is below them). Under each aligned
map: the label of what the model classifies (class token or pooled tokens)
against the augment's own label (``--mix``: CutMix's, ResizeMix's or
Mixup's area label), both as image 1's share, and the range of the aligned
map.

Examples::

    python tools/analysis/label_maps.py \\
        configs/demo/vit-tiny-p4_1xb64-tlalign_digits.py epoch_40.pth \\
        --num-images 4 --work-dir docs

Writes ``label_maps.png`` (or ``--out``) and ``label_maps.json``.
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
from tlalign_mm.analysis.label_maps import (  # noqa: E402
    display_images,
    label_colours,
    label_maps,
)
from tlalign_mm.analysis.session import (  # noqa: E402
    write_json,
)

#: the augments' names in the picture
MIX_NAMES = {'cutmix': 'CutMix', 'mixup': 'Mixup', 'resizemix': 'ResizeMix'}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Initial and aligned label maps of CutMix pairs.')
    add_common_args(parser)
    parser.add_argument('--out', default='label_maps.png',
                        help='PNG file name, inside the work dir')
    parser.add_argument('--dpi', type=int, default=80)
    parser.set_defaults(num_images=4)
    args = parser.parse_args(argv)
    if args.mix == 'none':
        parser.error('Label maps need mixed images (--mix cutmix, mixup or '
                     'resizemix).')
    return args


def main(argv=None):
    args = parse_args(argv)
    model, batches = open_analysis(args)
    work_dir = work_dir_for(args, 'label_maps')
    cols = {k: [] for k in ('image1', 'image2', 'mixed', 'initial',
                            'aligned')}
    rows = []

    def show(images):
        return display_images(model.data_preprocessor, images)

    for batch in batches:
        maps = label_maps(model, batch)
        cols['image1'] += list(show(batch.source_images(0)))
        cols['image2'] += list(show(batch.source_images(1)))
        cols['mixed'] += list(show(batch.mixed))
        cols['initial'] += list(label_colours(maps.initial).cpu())
        cols['aligned'] += list(label_colours(maps.aligned).cpu())
        for i in range(len(batch.mixed)):
            rows.append(dict(
                cutmix_label=maps.area[i].tolist(),
                aligned_label=maps.readout[i].tolist(),
                initial_map=maps.initial[i, 0].tolist(),
                aligned_map=maps.aligned[i, 0].tolist()))
    if not rows:
        raise SystemExit('No images.')
    # The label of what is classified, the CutMix label, and the range of
    # the aligned map (image 1's share): after many blocks it is narrow.
    mix = MIX_NAMES[args.mix]
    titles = []
    for r in rows:
        share = torch.tensor(r['aligned_map'])
        titles.append(f"label {r['aligned_label'][0]:.2f} ({mix} "
                      f"{r['cutmix_label'][0]:.2f})\nmap "
                      f"{share.min():.2f}-{share.max():.2f}")
    png = figures.label_map_grid(
        *[[x.numpy() for x in cols[k]] for k in cols],
        osp.join(work_dir, args.out), titles=titles, dpi=args.dpi, mix=mix)
    js = write_json(osp.join(work_dir, osp.splitext(args.out)[0] + '.json'),
                    dict(config=args.config, checkpoint=args.checkpoint,
                         mix=mix, note='maps: share of image 1 per token; '
                         'cutmix_label: the mix\'s own (area) label',
                         rows=rows))
    print(f'\nWrote {png}, {js}')
    return rows


if __name__ == '__main__':
    torch.set_grad_enabled(False)
    main()
