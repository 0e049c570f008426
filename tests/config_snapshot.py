"""What every config under ``configs/`` resolves to: a developer tool, and
the tests' one parse of each config per session.

``tests/config_snapshot.txt`` holds one line per config: its path and the
first 16 hex digits of the SHA-256 of its resolved dict
(``Config.fromfile(path).to_dict()``, pretty-printed with sorted keys, so
tuples and lists stay distinct). It is not a test: a refactor of the
configs checks itself "behaviour unchanged" with ``--check`` (and reads
any change with ``--diff``), and an intentional change rewrites it with
``--update``. What the configs mean is tested as properties
(``tests/test_configs.py`` and the recipe tests), which parse each config
once per session through :func:`load`.

Every ``{{$VAR:default}}`` variable of the configs is unset while resolving,
so the digests are those of the defaults.

Usage (from the repository root)::

    # rewrite the snapshot after an intentional change
    PYTHONPATH=$PWD python -m tests.config_snapshot --update
    # list the configs whose resolved dict differs from the snapshot
    PYTHONPATH=$PWD python -m tests.config_snapshot --check
    # readable diff of one config against its resolution at a git revision
    # (default HEAD: the configs/ folder of that commit, resolved here)
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
_ENV_VAR = re.compile(r'\{\{\s*\$(\w+)')


def config_paths(root: str = ROOT) -> list:
    """Every runnable config (``_base_`` folders excluded), relative to
    ``root``, sorted."""
    return sorted(
        osp.relpath(p, root)
        for p in glob.glob(osp.join(root, 'configs', '**', '*.py'),
                           recursive=True)
        if '_base_' not in osp.relpath(p, root).split(os.sep))


@functools.lru_cache(maxsize=None)
def config_variables(root: str = ROOT) -> frozenset:
    """Names of the ``{{$VAR:default}}`` environment variables any config
    (or base) reads."""
    names = set()
    for path in glob.glob(osp.join(root, 'configs', '**', '*.py'),
                          recursive=True):
        with open(path) as f:
            names.update(_ENV_VAR.findall(f.read()))
    return frozenset(names)


@contextlib.contextmanager
def defaults_only(root: str = ROOT):
    """Unset the configs' environment variables (restored afterwards)."""
    saved = {k: os.environ.pop(k) for k in config_variables(root)
             if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _read_package_metafiles_once():
    """mmengine looks each ``mmpretrain::``/``mmseg::``/``mmdet::`` base up
    in every metafile of its package (85 YAML files for mmpretrain) before
    it falls back to the config path, at every parse: three quarters of a
    config's parse time. The files do not change within a process, so they
    are read once (this process only; mmengine's result is the same)."""
    from mmengine.config import utils
    if not hasattr(utils.load, 'cache_info'):
        utils.load = functools.lru_cache(maxsize=None)(utils.load)


@functools.lru_cache(maxsize=None)
def _parsed(path: str):
    from mmengine.config import Config

    import tlalign_mm  # noqa: F401  (the configs' custom_imports)
    _read_package_metafiles_once()
    with defaults_only():
        return Config.fromfile(path)


def load(path: str):
    """``Config.fromfile`` of ``path`` (absolute, or relative to the
    repository root) with the configs' environment variables unset, parsed
    once per process; each call returns its own copy."""
    return copy.deepcopy(_parsed(osp.join(ROOT, path)))


def resolved_text(path: str, root: str = ROOT) -> str:
    """The resolved dict of a config (a path under ``root``), with the
    configs' environment variables unset, pretty-printed with sorted keys."""
    from mmengine.config import Config

    import tlalign_mm  # noqa: F401  (the configs' custom_imports)
    _read_package_metafiles_once()
    with defaults_only(root):
        cfg = Config.fromfile(osp.join(root, path))
    return pprint.pformat(cfg.to_dict(), width=79, sort_dicts=True)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def current(root: str = ROOT) -> dict:
    """``{relative path: digest}`` of every config as the tree stands."""
    return {p: digest(resolved_text(p, root)) for p in config_paths(root)}


def read_snapshot(path: str = SNAPSHOT) -> dict:
    with open(path) as f:
        return dict(line.split() for line in f if line.strip())


def write_snapshot(digests: dict, path: str = SNAPSHOT) -> None:
    with open(path, 'w') as f:
        for name in sorted(digests):
            f.write(f'{name} {digests[name]}\n')


def compare(snapshot: dict, now: dict) -> list:
    """Lines naming each config added, removed or changed."""
    lines = []
    for name in sorted(set(snapshot) | set(now)):
        if name not in now:
            lines.append(f'removed: {name}')
        elif name not in snapshot:
            lines.append(f'new:     {name}')
        elif snapshot[name] != now[name]:
            lines.append(f'changed: {name}')
    return lines


def diff_at_ref(config: str, ref: str = 'HEAD') -> str:
    """Unified diff of ``config``'s resolved dict, ``ref``'s configs/ vs the
    working tree's (both resolved with this tree's package)."""
    config = osp.relpath(osp.abspath(config), ROOT)
    archive = subprocess.run(
        ['git', '-C', ROOT, 'archive', ref, 'configs'],
        check=True, capture_output=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter='data')
        old = resolved_text(config, tmp).splitlines() \
            if osp.exists(osp.join(tmp, config)) else []
    new = resolved_text(config).splitlines() \
        if osp.exists(osp.join(ROOT, config)) else []
    return '\n'.join(difflib.unified_diff(
        old, new, f'{ref}:{config}', f'worktree:{config}', lineterm=''))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description='Resolved-config snapshot of configs/ '
        '(tests/config_snapshot.txt).')
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument('--update', action='store_true',
                       help='rewrite the snapshot from the tree')
    group.add_argument('--check', action='store_true',
                       help='list configs that differ from the snapshot')
    group.add_argument('--diff', metavar='CONFIG',
                       help='diff one config against its resolution at '
                       '--ref')
    parser.add_argument('--ref', default='HEAD',
                        help='git revision for --diff (default HEAD)')
    args = parser.parse_args(argv)
    if args.diff:
        print(diff_at_ref(args.diff, args.ref) or 'identical')
        return 0
    now = current()
    if args.update:
        write_snapshot(now)
        print(f'wrote {len(now)} digests to {osp.relpath(SNAPSHOT)}')
        return 0
    lines = compare(read_snapshot(), now)
    print('\n'.join(lines) or f'all {len(now)} configs match the snapshot')
    return 1 if lines else 0


if __name__ == '__main__':
    sys.exit(main())
