"""The README is real: every config its tables name exists, and its
aligned-labels snippet runs as written, TL-Align's label moving visibly
away from CutMix's area label."""
import os.path as osp
import random
import re

import numpy as np
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def readme():
    with open(osp.join(ROOT, 'README.md'), encoding='utf-8') as f:
        return f.read()


def expand(name):
    """The names ``a{b,c}[_d].py`` stands for: ab.py, ac.py, ab_d.py..."""
    part = re.search(r'\{([^}]*)\}|\[([^]]*)\]', name)
    return [name] if part is None else [
        full for option in (part[1].split(',') if part[1] is not None
                            else ['', part[2]])
        for full in expand(name[:part.start()] + option + name[part.end():])]


def test_every_config_the_tables_name_exists():
    """A table row's first cell names configs (or folders) under
    ``configs/``; a name without a folder is in the one before it."""
    paths = []
    for cell in re.findall(r'^\| (`.*?) \|', readme(), flags=re.M):
        folder = ''
        for name in re.findall(r'`([^`]+)`', cell):
            if '/' in name.rstrip('/'):
                folder = name[:name.index('/') + 1]
            else:
                name = folder + name if name.endswith('.py') else name
            paths += expand(name)
    # the tables were read: ImageNet, SL-ViT, demo and downstream rows
    assert {p.split('/')[0] for p in paths} >= {'tlalign', 'sl_vit', 'demo',
                                                'upernet'}
    assert [p for p in paths
            if not osp.exists(osp.join(ROOT, 'configs', p))] == []


def test_the_snippet_aligns():
    snippets = [b for b in re.findall(r'```python\n(.*?)```', readme(),
                                      flags=re.S)
                if 'TLCutMix' in b and 'print(' in b]
    assert len(snippets) == 1
    # the snippet seeds torch; the box draw of mmpretrain's CutMix is numpy's
    np.random.seed(0)
    random.seed(0)
    names = {}
    exec(compile(snippets[0], 'README.md', 'exec'), names)
    area, aligned = names['area_targets'], names['aligned']
    # label distributions over the ten classes, on the same sources
    assert area.shape == aligned.shape == (4, 10)
    for label in (area, aligned):
        # float32 sums of 10 shares, each after 12 half-steps: ~10 ulp of 1
        torch.testing.assert_close(label.sum(1), torch.ones(4))
        assert label.min() >= 0
    assert torch.equal(area > 0, aligned > 0)
    # the alignment moved the printed label by more than the 4th decimal
    # its print shows (an area target, or near-uniform attention, does not)
    assert (area[0] - aligned[0]).abs().max() > 1e-3, (area[0], aligned[0])
