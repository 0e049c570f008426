"""The model index (``model-index.yml``, one ``metafile.yml`` per config
folder) as mmpretrain's ``ModelHub`` reads it: every config under
``configs/`` (``_base_`` aside) is exactly one entry, named by its stem, in
its folder's metafile and a collection there; every number an entry states
is the one ``docs/recipes.md`` and the folder's ``README.md`` state for
that config, and each of those documents' rows that gives one config alone
a number has it in the metafile.

A table row gives a config a number when its first cell names the config
(a backticked path under ``configs/`` or file name, globs, ``{a,b}`` and
``[_optional]`` allowed): in the column headed by the result's dataset if
the table has one, else in the last cell (the first number there, when
that row names the config alone). No config is parsed."""
import fnmatch
import functools
import os.path as osp
import re

from modelindex.load_model_index import load

from tlalign_mm.testing.configs import ROOT, config_paths

from .test_readme import expand

NUMBER = re.compile(r'\d+\.\d+')


@functools.lru_cache(maxsize=None)
def _rows(doc):
    """``(header, cells, configs named)`` of every table body row of
    ``doc``, configs as paths under ``configs/``."""
    rels = [p[len('configs/'):] for p in config_paths()]
    rows, header = [], None
    for line in open(osp.join(ROOT, doc), encoding='utf-8'):
        if not line.startswith('|'):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if header is None:
            header = cells
        elif set(''.join(cells)) - set('-: '):
            pats = [p for b in re.findall(r'`([^`]+)`', cells[0])
                    for p in expand(b)]
            rows.append((header, cells, {
                r for r in rels for p in pats if fnmatch.fnmatchcase(r, p)
                or fnmatch.fnmatchcase(osp.basename(r), p)}))
    return rows


@functools.lru_cache(maxsize=None)
def _models():
    index = load(osp.join(ROOT, 'model-index.yml'))
    index.build_models_with_collections()
    return index


def test_every_config_is_one_entry_named_by_its_stem():
    index = _models()
    assert sorted(m.config for m in index.models) == config_paths()
    metafile = {c.name: osp.relpath(c.filepath, ROOT)
                for c in index.collections}
    for model in index.models:
        here = osp.join(osp.dirname(model.config), 'metafile.yml')
        assert model.name == osp.splitext(osp.basename(model.config))[0]
        assert osp.relpath(model.filepath, ROOT) == here, model.name
        assert metafile[model.in_collection] == here, model.name
    for c in index.collections:
        assert osp.isfile(osp.join(ROOT, c.readme)), c.readme


def test_numbers_are_the_docs_numbers():
    for model in _models().models:
        rel = model.config[len('configs/'):]
        numbers = {v for r in model.results for v in r.metrics.values()
                   if v is not None}
        for doc in ('docs/recipes.md',
                    osp.join(osp.dirname(model.config), 'README.md')):
            rows = [(h, c, n) for h, c, n in _rows(doc) if rel in n]
            assert rows or doc == 'docs/recipes.md', f'{doc} lacks {rel}'
            for r in model.results:
                for v in filter(None, r.metrics.values()):
                    assert any(v in map(float, NUMBER.findall(
                        c[h.index(r.dataset)] if r.dataset in h else c[-1]))
                        for h, c, _ in rows), f'{doc} does not give {rel} {v}'
            for _, c, named in rows:
                first = NUMBER.match(c[-1])
                assert len(named) > 1 or not first or \
                    float(first[0]) in numbers, f'{doc} gives {rel} {first[0]}'
