"""What every config under ``configs/`` resolves to: a developer tool, not a
test (the tests' one parse of each config per session is
:func:`tlalign_mm.testing.configs.load`).

A refactor of the configs checks itself "behaviour unchanged" against a git
revision (default HEAD): ``--check`` lists the configs whose resolved dict
(``Config.fromfile(path).to_dict()``, the configs' ``{{$VAR:default}}``
variables unset, both sides resolved with this tree's package) differs,
``--diff`` shows one config's change. What the configs mean is tested as
properties (tests/test_configs.py, tests/test_paper_configs.py).

Usage (from the repository root)::

    .venv/bin/python tools/config_snapshot.py --check [--ref main]
    .venv/bin/python tools/config_snapshot.py --diff \\
        configs/tlalign/deit-small_4xb256-tlalign_in1k.py [--ref HEAD~1]
"""
import argparse
import difflib
import io
import os.path as osp
import pprint
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from tlalign_mm.testing.configs import ROOT, config_paths, resolved  # noqa: E402,E501


def text(path: str, root: str = ROOT) -> list:
    return pprint.pformat(resolved(path, root).to_dict(), width=79,
                          sort_dicts=True).splitlines() \
        if osp.exists(osp.join(root, path)) else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument('--check', action='store_true')
    group.add_argument('--diff', metavar='CONFIG')
    parser.add_argument('--ref', default='HEAD')
    args = parser.parse_args(argv)
    archive = subprocess.run(['git', '-C', ROOT, 'archive', args.ref,
                              'configs'], check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter='data')
        if args.diff:
            config = osp.relpath(osp.abspath(args.diff), ROOT)
            print('\n'.join(difflib.unified_diff(
                text(config, tmp), text(config), f'{args.ref}:{config}',
                f'worktree:{config}', lineterm='')) or 'identical')
            return 0
        changed = [p for p in sorted(set(config_paths()) | set(
            config_paths(tmp))) if text(p, tmp) != text(p)]
    print('\n'.join(changed) or f'every config resolves as at {args.ref}')
    return 1 if changed else 0


if __name__ == '__main__':
    sys.exit(main())
