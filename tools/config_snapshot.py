"""What every config under ``configs/`` resolves to: a developer tool, not a
test, and the tests' one parse of each config per session (:func:`load`).

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
import copy
import difflib
import functools
import glob
import io
import os
import os.path as osp
import pprint
import re
import subprocess
import sys
import tarfile
import tempfile
from unittest import mock

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def config_paths(root: str = ROOT) -> list:
    """Every runnable config (``_base_`` folders excluded), relative to
    ``root``, sorted."""
    return sorted(osp.relpath(p, root) for p in glob.glob(
        osp.join(root, 'configs', '**', '*.py'), recursive=True)
        if '_base_' not in osp.relpath(p, root).split(os.sep))


def _read_package_metafiles_once():
    """At every parse, mmengine reads every metafile of a ``mmpretrain::``
    base's package (85 YAML files for mmpretrain) and asks pkg_resources
    whether the package is installed, reloading it: most of a parse's time.
    Neither changes within a process, so both are asked once (this process
    only; mmengine's result is the same)."""
    from mmengine.config import config, utils
    if not hasattr(utils.load, 'cache_info'):
        utils.load = functools.lru_cache(maxsize=None)(utils.load)
        config.is_installed = functools.lru_cache(maxsize=None)(
            config.is_installed)


def resolved(path: str, root: str = ROOT):
    """``Config.fromfile`` of ``path`` (relative to ``root``, or absolute)
    with the ``{{$VAR:default}}`` variables any config reads unset."""
    from mmengine.config import Config

    import tlalign_mm  # noqa: F401  (the configs' custom_imports)
    _read_package_metafiles_once()
    names = {n for p in glob.glob(osp.join(root, 'configs', '**', '*.py'),
                                  recursive=True)
             for n in re.findall(r'\{\{\s*\$(\w+)', open(p).read())}
    env = {k: v for k, v in os.environ.items() if k not in names}
    with mock.patch.dict(os.environ, env, clear=True):
        return Config.fromfile(osp.join(root, path))


_parsed = functools.lru_cache(maxsize=None)(resolved)


def load(path: str):
    """:func:`resolved`, parsed once per process; each call returns its own
    copy."""
    return copy.deepcopy(_parsed(osp.join(ROOT, path)))


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
