"""What every config under ``configs/`` resolves to: a developer tool, not a
test, and the tests' one parse of each config per session (:func:`load`).

``tests/config_snapshot.txt`` holds one line per config: its path and the
first 16 hex digits of the SHA-256 of its resolved dict
(``Config.fromfile(path).to_dict()``, pretty-printed with sorted keys), with
the configs' ``{{$VAR:default}}`` variables unset. A refactor of the configs
checks itself "behaviour unchanged" with ``--check``, reads a change with
``--diff``, and an intentional change rewrites the file with ``--update``.
What the configs mean is tested as properties (tests/test_configs.py,
tests/test_paper_configs.py).

Usage (from the repository root)::

    PYTHONPATH=$PWD python -m tests.config_snapshot --update
    PYTHONPATH=$PWD python -m tests.config_snapshot --check
    # one config against its resolution at a git revision (default HEAD)
    PYTHONPATH=$PWD python -m tests.config_snapshot --diff \\
        configs/tlalign/deit-small_4xb256-tlalign_in1k.py [--ref HEAD~1]
"""
import argparse
import contextlib
import copy
import difflib
import functools
import glob
import hashlib
import io
import os
import os.path as osp
import pprint
import re
import subprocess
import sys
import tarfile
import tempfile

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SNAPSHOT = osp.join(ROOT, 'tests', 'config_snapshot.txt')


def config_paths(root: str = ROOT) -> list:
    """Every runnable config (``_base_`` folders excluded), relative to
    ``root``, sorted."""
    return sorted(osp.relpath(p, root) for p in glob.glob(
        osp.join(root, 'configs', '**', '*.py'), recursive=True)
        if '_base_' not in osp.relpath(p, root).split(os.sep))


@functools.lru_cache(maxsize=None)
def config_variables(root: str = ROOT) -> frozenset:
    """The ``{{$VAR:default}}`` variables any config or base reads."""
    return frozenset(n for p in glob.glob(
        osp.join(root, 'configs', '**', '*.py'), recursive=True)
        for n in re.findall(r'\{\{\s*\$(\w+)', open(p).read()))


@contextlib.contextmanager
def defaults_only(root: str = ROOT):
    """The configs' environment variables unset, restored afterwards."""
    saved = {k: os.environ.pop(k) for k in config_variables(root)
             if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


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
    with the configs' environment variables unset."""
    from mmengine.config import Config

    import tlalign_mm  # noqa: F401  (the configs' custom_imports)
    _read_package_metafiles_once()
    with defaults_only(root):
        return Config.fromfile(osp.join(root, path))


def load(path: str):
    """:func:`resolved`, parsed once per process; each call returns its own
    copy."""
    return copy.deepcopy(_parsed(osp.join(ROOT, path)))


_parsed = functools.lru_cache(maxsize=None)(resolved)


def text(path: str, root: str = ROOT) -> str:
    return pprint.pformat(resolved(path, root).to_dict(), width=79,
                          sort_dicts=True)


def diff_at_ref(config: str, ref: str = 'HEAD') -> str:
    """Unified diff of ``config``'s resolved dict, ``ref``'s configs/ vs the
    working tree's (both resolved with this tree's package)."""
    config = osp.relpath(osp.abspath(config), ROOT)
    archive = subprocess.run(['git', '-C', ROOT, 'archive', ref, 'configs'],
                             check=True, capture_output=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter='data')
        old = text(config, tmp).splitlines() \
            if osp.exists(osp.join(tmp, config)) else []
    new = text(config).splitlines() if osp.exists(config) else []
    return '\n'.join(difflib.unified_diff(
        old, new, f'{ref}:{config}', f'worktree:{config}', lineterm=''))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument('--update', action='store_true',
                       help='rewrite the snapshot from the tree')
    group.add_argument('--check', action='store_true',
                       help='list configs that differ from the snapshot')
    group.add_argument('--diff', metavar='CONFIG',
                       help='diff one config against its resolution at --ref')
    parser.add_argument('--ref', default='HEAD',
                        help='git revision for --diff (default HEAD)')
    args = parser.parse_args(argv)
    if args.diff:
        print(diff_at_ref(args.diff, args.ref) or 'identical')
        return 0
    now = {p: hashlib.sha256(text(p).encode()).hexdigest()[:16]
           for p in config_paths()}
    if args.update:
        with open(SNAPSHOT, 'w') as f:
            f.writelines(f'{p} {now[p]}\n' for p in sorted(now))
        print(f'wrote {len(now)} digests to {osp.relpath(SNAPSHOT)}')
        return 0
    with open(SNAPSHOT) as f:
        before = dict(line.split() for line in f if line.strip())
    lines = [('removed' if p not in now else 'new' if p not in before else
              'changed') + f': {p}' for p in sorted(before.keys() | now.keys())
             if before.get(p) != now.get(p)]
    print('\n'.join(lines) or f'all {len(now)} configs match the snapshot')
    return 1 if lines else 0


if __name__ == '__main__':
    sys.exit(main())
