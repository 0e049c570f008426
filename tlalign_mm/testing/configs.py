"""The repository's configs as the tests and ``tools/config_snapshot.py``
read them: every runnable config (:func:`config_paths`), resolved with the
variables they read unset (:func:`resolved`), parsed once per process
(:func:`load`)."""
import copy
import functools
import glob
import os
import os.path as osp
import re
from unittest import mock

#: the checkout this package sits in (``configs/`` beside ``tlalign_mm/``)
ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def config_paths(root: str = ROOT) -> list:
    """Every runnable config (``_base_`` folders excluded), relative to
    ``root``, sorted."""
    return sorted(osp.relpath(p, root) for p in glob.glob(
        osp.join(root, 'configs', '**', '*.py'), recursive=True)
        if '_base_' not in osp.relpath(p, root).split(os.sep))


def read_package_metafiles_once():
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
    read_package_metafiles_once()
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
