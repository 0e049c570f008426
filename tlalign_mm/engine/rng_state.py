"""The random number generator states a training step draws from.

A training process draws from Python's ``random`` (mmcv transforms), numpy's
global generator (mmcv transforms, the CutMix/Mixup batch augmentations) and
torch's CPU and CUDA generators (drop-path, dropout, ``torch.randperm`` of
the batch augmentations, the DataLoader's base seed). Saving all four with a
checkpoint, and setting them back at the right moment of the resumed run,
is what makes it draw exactly the numbers the uninterrupted run drew.

Not covered: the generators inside DataLoader worker processes
(``num_workers > 0``), which mmengine seeds per worker; resumed runs with
workers draw their data augmentation from freshly seeded workers.
"""
import random
from typing import Any, Dict

import numpy as np
import torch

__all__ = ['capture_rng', 'restore_rng']


def capture_rng() -> Dict[str, Any]:
    """The current states: ``python`` (``random.getstate()``), ``numpy``
    (``np.random.get_state()``), ``torch`` (CPU ``ByteTensor``) and, once
    CUDA is initialised, ``cuda`` (one ``ByteTensor`` per device). All are
    tuples, ints, numpy arrays and tensors: they load with
    ``torch.load(weights_only=True)`` through the project's allow-list."""
    state = dict(
        python=random.getstate(),
        numpy=np.random.get_state(),
        torch=torch.get_rng_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: Dict[str, Any]) -> None:
    """Set the states :func:`capture_rng` returned (tensors may have been
    moved to a GPU by ``map_location``)."""
    version, internal, gauss = state['python']
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state['numpy']
    np.random.set_state(
        (name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state['torch'].cpu())
    if 'cuda' in state and torch.cuda.is_available():
        cuda = [s.cpu() for s in state['cuda']]
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
