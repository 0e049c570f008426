"""Export the backbone of a TL-Align (or CutMix) classifier checkpoint.

Usage::

    python tools/export_backbone.py CKPT OUT [--to {mmpretrain,mmseg,mmdet}]
        [--prefix backbone.] [--check CONFIG]
    python tools/export_backbone.py CKPT OUT --format timm [--config CONFIG]

Writes ``{'meta': {...plain types...}, 'state_dict': {'backbone.*': tensor}}``
which loads with ``torch.load(OUT, weights_only=True)`` anywhere (no
allow-list needed). The key layout is mmpretrain's for every target: this
package's mmseg and mmdet configs build mmpretrain's backbones through the
cross-scope registry, so nothing is converted. ``--check CONFIG`` then
builds CONFIG's backbone and loads the export into it with the strict
loader, the way fine-tuning will, before OUT is written: any missing,
unexpected or mis-shaped key fails here rather than hours into a run, and
leaves no OUT behind.

Export is optional: the downstream configs read the Runner checkpoint
directly (same ``backbone.`` prefix). It gives a small file that needs
neither ``tlalign_mm`` nor the allow-list to load.

``--format timm`` (a ``PooledTIMMBackbone`` model) writes a plain timm state
dict instead, head included, that ``timm.create_model(name,
pretrained=False, **kwargs).load_state_dict(sd, strict=True)`` loads; the
export checks exactly that and prints the call
(:func:`tlalign_mm.downstream.export.export_timm`).
"""
import argparse
import importlib.util
import os.path as osp
import sys

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's tlalign_mm, installed or not


def load_cli():
    """:mod:`tlalign_mm.apis.cli` (standard library only), without running
    ``tlalign_mm/__init__`` (torch and OpenMMLab: seconds): ``--help`` and
    a wrong argument answer at once; what the tool does is imported after
    parsing."""
    name = 'tlalign_mm.apis.cli'
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, osp.join(ROOT, 'tlalign_mm', 'apis', 'cli.py'))
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


#: tlalign_mm.downstream.export.TARGETS (not imported before parsing)
TARGETS = ('mmpretrain', 'mmseg', 'mmdet')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Export the backbone tensors of a classifier checkpoint '
        'as a small file that loads with torch.load(weights_only=True) '
        'anywhere (--format timm: a plain timm state dict).',
        epilog=load_cli().DEBUG_HELP)
    parser.add_argument('checkpoint', help='Runner checkpoint (.pth)')
    parser.add_argument('out', help='output file')
    parser.add_argument('--to', choices=TARGETS, default='mmpretrain',
                        help='library that fine-tunes it (recorded in meta)')
    parser.add_argument('--prefix', default='backbone.',
                        help="the backbone's key prefix in the checkpoint")
    parser.add_argument('--check', metavar='CONFIG', help='downstream config '
                        'whose backbone must load OUT strictly')
    parser.add_argument('--format', choices=('mmpretrain', 'timm'),
                        default='mmpretrain', help="'timm': a plain timm "
                        'state dict of a PooledTIMMBackbone classifier')
    parser.add_argument('--config', help='--format timm: the training '
                        'config, if the checkpoint does not record it')
    args = parser.parse_args(argv)
    a, b = args.checkpoint, args.out
    if osp.samefile(a, b) if osp.exists(a) and osp.exists(b) else \
            osp.realpath(a) == osp.realpath(b):
        parser.error(
            f'OUT {b!r} is the input checkpoint {a!r}: exporting would '
            'replace the training checkpoint (optimizer, schedules, head) by '
            'the backbone alone. Give another OUT, e.g. '
            f'{osp.splitext(a)[0] + "_backbone.pth"!r}.')
    if args.check and args.format == 'timm':
        parser.error('--check is for --format mmpretrain; --format timm '
                     'always checks the export against timm.create_model.')
    return args


def main(argv=None):
    args = parse_args(argv)
    from tlalign_mm.checkpoint import install
    from tlalign_mm.downstream.export import export_backbone, export_timm
    install()  # every load through tlalign_mm.checkpoint.load
    if args.format == 'timm':
        info = export_timm(args.checkpoint, args.out, args.config)
        kwargs = ''.join(f', {k}={v!r}' for k, v in info['kwargs'].items())
        print(f"exported {info['num_tensors']} tensors to {args.out} (timm "
              f"layout; head: {info['head'] or 'none'})\ncheck: "
              f"timm.create_model({info['model_name']!r}, pretrained=False"
              f'{kwargs}) loads it with strict=True')
        return
    meta = export_backbone(args.checkpoint, args.out, args.to, args.prefix,
                           args.check)
    print(f"exported {meta['num_tensors']} tensors "
          f"({meta['num_params']:,} parameters) under {args.prefix!r} to "
          f"{args.out} for {args.to} (mmpretrain key layout)")
    if meta['backbone'] is not None:
        print(f"pretraining backbone: {meta['backbone']}")
    if args.check:
        print(f'check: the backbone of {args.check} loads {args.out} '
              'strictly (else nothing would have been written)')


if __name__ == '__main__':
    load_cli().run_tool(main)  # a refused file: one line (--debug)
