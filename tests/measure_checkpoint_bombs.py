"""Time and peak memory of ``tlalign_mm.checkpoint.load`` on issue 39's
memory and hash cases, each in a child process (run by hand, not by
pytest)::

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 \\
        python -m tests.measure_checkpoint_bombs DIR [TIMEOUT_S]

The child imports ``tlalign_mm``, loads a tiny checkpoint (so that the lazy
imports count before the case), then loads the case; it prints its peak RSS
after the imports and after the load (``ru_maxrss``); a child past
``TIMEOUT_S`` (default 200) is killed and its peak read with ``wait4``.
For another checkout's ``tlalign_mm`` (main), run from a folder without
one, ``PYTHONPATH=<that checkout>:<this one>`` (``-m`` puts the current
folder first).

Measured on a shared 2-core machine (load average 5-10, so times are loose),
peak RSS 1,100 MB after the imports; main 6c8e909 -> issue 39:

- ``history_shared`` (100 HistoryBuffers viewing one 16 + 16 MB storage,
  32 MB): loaded in 74-141 s, peak 4,428 MB (+3.3 GB) -> refused in
  1.1-2.1 s, peak 1,260 MB (+160 MB).
- ``config_text`` (``meta['cfg']`` of 4 MB): loaded in 31-59 s, peak
  3,103 MB (+2.0 GB) -> loaded without it in 0.1 s, peak 1,112 MB.
- ``hash_keys`` (150,000 int keys ``k * (2**61 - 1)``, 2 MB): killed at
  200 s, 1,110 MB -> refused in 0.02-0.1 s, peak 1,102 MB.
"""
import json
import os
import resource
import subprocess
import sys
import time
from collections import OrderedDict

import torch


def history_shared(path, n=100, elems=2**21):
    log = torch.zeros(elems, dtype=torch.float64)
    count = torch.ones(elems, dtype=torch.int64)
    torch.save(dict(state_dict={'w': torch.ones(2)}, message_hub=dict(
        log_scalars={f'k{i}': dict(log=log[:], count=count[:],
                                   max_length=elems) for i in range(n)})),
               path)


def config_text(path, mb=4):
    torch.save(dict(state_dict={'w': torch.ones(2)}, meta=dict(
        cfg='x = [' + '1,' * (mb * 2**19) + ']\n')), path)


class _Items:
    """Pickles as an OrderedDict of ``pairs`` (REDUCE, then SETITEMS),
    without building it: its keys would take minutes to insert here too."""

    def __init__(self, pairs):
        self.pairs = pairs

    def __reduce__(self):
        return OrderedDict, (), None, None, iter(self.pairs)


def hash_keys(path, n=150_000):
    torch.save(dict(state_dict={'w': torch.ones(2)}, meta=dict(
        dataset_meta=_Items((k * (2**61 - 1), 0) for k in range(1, n + 1)))),
        path)


def child(path):
    import tlalign_mm  # noqa: F401
    from tlalign_mm.checkpoint import load
    warm = os.path.join(os.path.dirname(path), 'warm.pth')
    torch.save({'state_dict': {'w': torch.ones(2)}}, warm)
    load(warm)
    mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps(dict(imports_mb=mb)), flush=True)
    start = time.perf_counter()
    try:
        load(path)
        outcome = 'loaded'
    except Exception as error:  # noqa: BLE001  reported
        outcome = f'{type(error).__name__}: {str(error)[:80]}'
    print(json.dumps(dict(outcome=outcome, seconds=round(
        time.perf_counter() - start, 2), peak_mb=resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss // 1024)), flush=True)


def main(folder, timeout=200):
    os.makedirs(folder, exist_ok=True)
    for write in (history_shared, config_text, hash_keys):
        path = os.path.join(folder, f'{write.__name__}.pth')
        write(path)
        start, out = time.perf_counter(), open(path + '.out', 'w')
        proc = subprocess.Popen([sys.executable, '-m', __spec__.name,
                                 'child', path], stdout=out,
                                stderr=subprocess.DEVNULL)
        while not (waited := os.wait4(proc.pid, os.WNOHANG))[0]:
            if time.perf_counter() - start > timeout:
                proc.kill()
                waited = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
        proc.returncode = waited[1]
        out.close()
        lines = [json.loads(line) for line in open(path + '.out')
                 if line.startswith('{')]
        print(write.__name__, f'{os.path.getsize(path) / 2**20:.1f} MB',
              lines or f'killed at {timeout} s', f'peak (wait4) '
              f'{waited[2].ru_maxrss // 1024} MB', flush=True)


if __name__ == '__main__':
    if sys.argv[1] == 'child':
        child(sys.argv[2])
    else:
        main(sys.argv[1], *map(int, sys.argv[2:]))
