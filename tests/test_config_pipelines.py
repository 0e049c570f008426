"""Every config's data pipelines, built as the Runner builds them (each
transform by mmengine's ``TRANSFORMS`` under the config's
``default_scope``, or the ``_scope_`` it names), hold every option the
config gives: the registered class of that scope, and each key's value on
the built object, recursively through ``AutoAugment``, ``RandAugment``,
``RandomChoice`` and ``TestTimeAug``. A sub-policy's op holds its own keys
and the ``hparams`` mmpretrain's docstrings promise it (a key its
``__init__`` names and its dict lacks; RandAugment's magnitude settings on
each op with a ``magnitude_range``), and every ``hparams`` key reaches some
op. mmpretrain 1.2.0's own ``AutoAugment`` builds its ops without its
``hparams`` (``auto_augment.py:74-76``): the CIFAR configs' PIL ops were
built with ``channel_order='bgr'`` on RGB arrays (issue 38). The same for
every dataloader's sampler and loader options, and the top-level
``data_preprocessor`` the Runner ignores where the model has one."""
import copy
import inspect
from itertools import product

import numpy as np
import pytest
import torch
from mmcv import transforms as mmcv_transforms
from mmengine.registry import DATA_SAMPLERS, TRANSFORMS, DefaultScope
from mmengine.runner import Runner
from mmpretrain.datasets.transforms.auto_augment import (
    AUTOAUG_POLICIES,
    RANDAUG_POLICIES,
    AutoAugment,
    RandAugment,
)

from tlalign_mm.testing.configs import config_paths, load

# RandAugment hands these to every op with a magnitude_range
# (auto_augment.py:211-235; it drops a policy's `magnitude_key`, which the
# check below then reports as held nowhere)
RANDAUG_KEYS = ('magnitude_level', 'total_level', 'magnitude_std')
# Where a transform keeps an option elsewhere: (type, key) -> reader of the
# built object (mmcv's random resizes hand their other keys to the Resize
# they build, processing.py:1066-1068, 1468-1470)
HELD_ELSEWHERE = {
    ('RandomResize', 'keep_ratio'): lambda t: t.resize.keep_ratio,
    ('RandomChoiceResize', 'keep_ratio'): lambda t: t.resize.keep_ratio,
}


def pipelines(obj, where=''):
    """``(dotted key, list of transform dicts)`` of every ``pipeline`` and
    ``*_pipeline`` in a resolved config dict."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if (key == 'pipeline' or key.endswith('_pipeline')) and \
                    isinstance(value, list):
                yield f'{where}{key}', value
            else:
                yield from pipelines(value, f'{where}{key}.')
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from pipelines(value, f'{where}{i}.')


def same(held, given) -> bool:
    """``held`` is ``given``: a list as a tuple, a number as the pair a
    size broadcasts it to (``crop_size=32`` -> ``(32, 32)``)."""
    if isinstance(held, np.ndarray):
        held = held.tolist()
    if isinstance(given, (list, tuple)):
        return isinstance(held, (list, tuple)) and len(held) == len(
            given) and all(map(same, held, given))
    if isinstance(given, dict):
        return isinstance(held, dict) and held.keys() == given.keys() and \
            all(same(held[k], given[k]) for k in given)
    if isinstance(held, tuple) and len(held) == 2 and \
            isinstance(given, (int, float)):
        return held == (given, given)
    return held == given


def named_args(cls) -> set:
    """What mmpretrain's ``merge_hparams`` hands an op: the named arguments
    of its ``__init__``."""
    return {name for name, p in inspect.signature(cls.__init__).parameters
            .items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def registered(cfg: dict, scope: str, root=TRANSFORMS):
    """The class ``cfg`` names, in the registry of its ``_scope_`` or
    ``scope`` under mmengine's ``root``, and that registry's scope."""
    with DefaultScope.overwrite_default_scope(scope), \
            root.switch_scope_and_registry(cfg.get('_scope_')) as registry:
        return registry.get(cfg['type']), registry.scope


def with_hparams(policy: dict, hparams: dict, scope: str) -> dict:
    cls, _ = registered(policy, scope)
    return {**{k: v for k, v in hparams.items() if k in named_args(cls)},
            **policy}


def check(cfg: dict, built, scope: str, where: str) -> list:
    """The options of ``cfg`` that ``built`` does not hold, one line each
    (``where``: the dotted key and the type)."""
    cls, scope = registered(cfg, scope)
    where = f'{where} {cfg["type"]}'
    if type(built) is not cls:
        return [f'{where}: built {type(built).__name__}, the {scope} '
                f'registry has {cls.__name__}']
    problems = []
    options = {k: v for k, v in cfg.items() if k not in ('type', '_scope_')}
    subs = []  # (sub-transform dicts, built sub-transforms)
    if isinstance(built, (AutoAugment, RandAugment)):
        auto = isinstance(built, AutoAugment)
        policies, hparams = options.pop('policies'), options.pop(
            'hparams', inspect.signature(type(built).__init__).parameters[
                'hparams'].default)
        if isinstance(policies, str):
            policies = (AUTOAUG_POLICIES if auto else RANDAUG_POLICIES)[
                policies]
        policies = [[with_hparams(t, hparams, scope) for t in sub]
                    for sub in (policies if auto else [policies])]
        if not auto:  # RandAugment's magnitude settings, its ops' own kept
            settings = {k: options.get(k, getattr(built, k))
                        for k in RANDAUG_KEYS}
            policies = [[{**settings, **t} if 'magnitude_range' in t else t
                         for t in policies[0]]]
        used = {k for sub in policies for t in sub for k in hparams
                if k in named_args(registered(t, scope)[0])}
        problems += [f'{where}: hparams {k!r} reaches no op'
                     for k in hparams if k not in used]
        built_subs = [s.transforms for s in built.transforms] if auto \
            else [built.transforms]
        subs = list(zip(policies, built_subs))
    elif isinstance(built, mmcv_transforms.RandomChoice):
        subs = list(zip(options.pop('transforms'),
                        [s.transforms for s in built.transforms]))
    elif isinstance(built, mmcv_transforms.TestTimeAug):
        choices = [t if isinstance(t, list) else [t]
                   for t in options.pop('transforms')]
        subs = list(zip(map(list, product(*choices)),
                        [s.transforms for s in built.subroutines]))
    for i, (sub_cfgs, sub_built) in enumerate(subs):
        if len(sub_cfgs) != len(sub_built):
            problems.append(f'{where}[{i}]: {len(sub_cfgs)} transforms, '
                            f'built {len(sub_built)}')
        for j, (c, b) in enumerate(zip(sub_cfgs, sub_built)):
            problems += check(c, b, scope, f'{where}[{i}][{j}]')
    for key, given in options.items():
        reader = HELD_ELSEWHERE.get((cfg['type'], key))
        if reader is None and not hasattr(built, key):
            problems.append(f'{where}: {key}={given!r} is held nowhere')
            continue
        held = reader(built) if reader else getattr(built, key)
        if not same(held, given):
            problems.append(f'{where}: {key}={given!r}, built {held!r}')
    return problems


@pytest.mark.parametrize('path', config_paths(), ids=str)
def test_every_pipeline_builds_with_every_option_the_config_gives(path):
    cfg = load(path)
    scope = cfg.get('default_scope')
    problems = []
    for where, pipeline in pipelines(cfg.to_dict()):
        for i, t in enumerate(pipeline):
            with DefaultScope.overwrite_default_scope(scope):
                # a copy: TestTimeAug builds into the lists it is given
                built = TRANSFORMS.build(copy.deepcopy(t))
            problems += check(t, built, scope, f'{where}.{i}')
    assert not problems, '\n'.join(problems)


class _StandIn(torch.utils.data.Dataset):
    """A dataset of 12 items, for the samplers and loaders."""

    def __len__(self):
        return 12

    def __getitem__(self, index):
        return index


@pytest.mark.filterwarnings('ignore:This DataLoader will create')
@pytest.mark.parametrize('path', config_paths(), ids=str)
def test_every_dataloader_holds_the_options_the_config_gives(path):
    """``Runner.build_dataloader`` on a stand-in dataset: the sampler's and
    batch sampler's options on them, the rest on the ``DataLoader``; and
    the top-level ``data_preprocessor``, which the Runner hands the model
    only where the model has none (``model.setdefault``, mmengine
    ``runner.py:426-428``), is the model's where the model has one."""
    cfg = load(path)
    scope = cfg.get('default_scope')
    problems = []
    for split in ('train', 'val', 'test'):
        given = cfg.get(f'{split}_dataloader')
        if not given:
            continue
        given = copy.deepcopy(given.to_dict())
        with DefaultScope.overwrite_default_scope(scope):
            loader = Runner.build_dataloader(dict(given, dataset=_StandIn()))
        for key, options in given.items():
            if key == 'dataset':
                continue
            where = f'{split}_dataloader.{key}'
            if key in ('sampler', 'batch_sampler'):
                built = loader.batch_sampler.sampler if (
                    key == 'sampler' and 'batch_sampler' in given) else \
                    getattr(loader, key)
                cls, _ = registered(options, scope, DATA_SAMPLERS)
                if type(built) is not cls:
                    problems.append(f'{where}: built {type(built)}, not '
                                    f'{cls}')
                problems += [
                    f'{where}.{k}={v!r}, built {getattr(built, k, None)!r}'
                    for k, v in options.items()
                    if k not in ('type', '_scope_')
                    and not same(getattr(built, k, None), v)]
                continue
            held = loader.batch_sampler.batch_size if (
                key == 'batch_size' and 'batch_sampler' in given) else \
                getattr(loader, key, None)
            if not same(held, options):
                problems.append(f'{where}={options!r}, built {held!r}')
    model = cfg.get('model')
    top = cfg.get('data_preprocessor')
    if top is not None and 'data_preprocessor' in model:
        if {k: v for k, v in top.items() if k != '_scope_'} != {
                k: v for k, v in model.data_preprocessor.items()
                if k != '_scope_'}:
            problems.append('data_preprocessor is not the model\'s: the '
                            f'Runner ignores it ({top} vs '
                            f'{model.data_preprocessor})')
    assert not problems, '\n'.join(problems)
