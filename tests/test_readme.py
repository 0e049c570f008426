"""The README's code is real: its align_labels snippet runs as written."""
import os.path as osp
import re

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def python_blocks():
    with open(osp.join(ROOT, 'README.md'), encoding='utf-8') as f:
        text = f.read()
    return re.findall(r'```python\n(.*?)```', text, flags=re.S)


def test_the_align_labels_snippet_runs(capsys):
    snippets = [b for b in python_blocks() if 'align_labels(' in b]
    assert len(snippets) == 1
    exec(compile(snippets[0], 'README.md', 'exec'), {})
    area, aligned = capsys.readouterr().out.split('tensor(')[1:]
    # Two printed label distributions over the ten classes.
    assert area.count(',') == aligned.count(',') == 9
