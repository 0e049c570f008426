"""Our checkpoints hold tensors and plain Python only: mmengine's
``HistoryBuffer``s, numpy values and ``OneCycleLR``'s annealing function
need globals outside torch's weights-only allow-list, so they are converted
on save (:func:`plain_checkpoint`) and the message hub rebuilt by
:func:`~.load.load`. The generator states of exact resume are plain too.
"""
import random
from collections import OrderedDict
from typing import Any, Dict

import numpy as np
import torch
from mmengine.logging import HistoryBuffer


def _plain(value: Any) -> Any:
    """numpy -> Python / tensors, containers walked; functions (a
    scheduler's ``anneal_func``, rebuilt from the config) dropped."""
    if isinstance(value, HistoryBuffer):
        log, count = value.data
        return dict(log=torch.tensor(log, dtype=torch.float64),
                    count=torch.tensor(count, dtype=torch.int64),
                    max_length=int(value.max_length))
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):  # numbers: a tensor; else a list
        return torch.from_numpy(value.copy()) if value.dtype.kind in \
            'biuf' else value.tolist()
    if isinstance(value, dict):  # a Counter (MultiStepLR's milestones)
        # as a dict: Counter(pairs) would count the pairs as keys
        return (OrderedDict if isinstance(value, OrderedDict) else dict)(
            (k, _plain(v)) for k, v in value.items()
            if not callable(v) or torch.is_tensor(v))
    if type(value) in (list, tuple):
        return type(value)(_plain(v) for v in value)
    return value


def plain_checkpoint(checkpoint: dict) -> None:
    """Convert, in place, what a Runner checkpoint holds besides tensors
    and plain Python (model and optimizer state are tensors already)."""
    for key in ('meta', 'message_hub', 'param_schedulers'):
        if key in checkpoint:
            checkpoint[key] = _plain(checkpoint[key])


def capture_rng() -> Dict[str, Any]:
    """The generator states a training step draws from: Python's
    ``random``, numpy's global generator, torch's CPU (and, once
    initialised, CUDA) generators; plain tuples, lists and tensors."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = dict(python=random.getstate(),
                 numpy=(name, keys.tolist(), int(pos), int(has_gauss),
                        float(cached)),
                 torch=torch.get_rng_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def _apply(state: Dict[str, Any], python, numpy, torch_set) -> None:
    version, internal, gauss = state['python']
    python.setstate((version, tuple(internal), gauss))
    name, keys, *rest = state['numpy']
    numpy.set_state((name, np.asarray(keys, dtype=np.uint32), *rest))
    torch_set(state['torch'].cpu())


def check_resume_state(state: Dict[str, Any]) -> None:
    """Raise unless ``state`` is what :class:`~.hooks.LastCheckpointHook`
    saves, applied to fresh generators (which check their own states, but
    numpy's MT19937 takes any position: a draw would read past its
    624-word key)."""
    rng, seed = state.get('rng'), state.get('sampler_seed')
    if set(state) - {'rng', 'sampler_seed'} or not (
            seed is None or type(seed) is int and 0 <= seed < 2**63):
        raise ValueError(f'keys {sorted(state)}, sampler_seed {seed!r}')
    if rng is not None:
        name, keys, pos, *_ = rng['numpy']
        if not (name == 'MT19937' and len(keys) == 624 and type(pos) is int
                and 0 <= pos <= 624):
            raise ValueError(f'numpy state: not MT19937 with 624 words at a '
                             f'position in [0, 624] ({pos!r})')
        _apply(rng, random.Random(), np.random.RandomState(),
               torch.Generator().set_state)


def restore_rng(state: Dict[str, Any]) -> None:
    """Set the states :func:`capture_rng` returned."""
    _apply(state, random, np.random, torch.set_rng_state)
    cuda = [s.cpu() for s in state.get('cuda', ())]
    if cuda and torch.cuda.is_available() and \
            len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
