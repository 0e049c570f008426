"""The README's code is real: its aligned-labels snippet runs as written
and prints a TL-Align label that differs from CutMix's area label.

The check reads what the snippet prints (CutMix's label, then TL-Align's),
not the names it calls, so it holds whatever the alignment function is
called."""
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


def printed_tensors(out: str):
    """The 1-D tensors ``print`` wrote, as float tensors."""
    return [torch.tensor([float(x) for x in re.findall(
        r'-?\d+\.\d*(?:e[-+]?\d+)?', body)])
        for body in re.findall(r'tensor\(\[(.*?)\]', out, flags=re.S)]


def test_the_snippet_aligns(capsys):
    snippets = [b for b in python_blocks() if 'TLCutMix' in b
                and 'print(' in b]
    assert len(snippets) == 1
    # the snippet seeds torch; the box draw of mmpretrain's CutMix is numpy's
    np.random.seed(0)
    random.seed(0)
    exec(compile(snippets[0], 'README.md', 'exec'), {})
    area, aligned = printed_tensors(capsys.readouterr().out)
    # two label distributions over the ten classes, on the same sources
    assert area.shape == aligned.shape == (10, )
    for label in (area, aligned):
        assert abs(label.sum() - 1) < 1e-3 and label.min() >= 0
    assert torch.equal(area > 0, aligned > 0)
    # the alignment moved the label: an area target would print the same
    assert (area - aligned).abs().max() > 0, (area, aligned)
