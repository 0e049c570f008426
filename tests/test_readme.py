"""The README's code is real: its aligned-labels snippet runs as written,
and TL-Align's label moves visibly away from CutMix's area label."""
import os.path as osp
import random
import re

import numpy as np
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def python_blocks():
    with open(osp.join(ROOT, 'README.md'), encoding='utf-8') as f:
        text = f.read()
    return re.findall(r'```python\n(.*?)```', text, flags=re.S)


def test_the_snippet_aligns():
    snippets = [b for b in python_blocks() if 'TLCutMix' in b
                and 'print(' in b]
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
