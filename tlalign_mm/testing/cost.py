"""What a training step costs beyond its arithmetic, counted
deterministically on any device: dispatched operations and host syncs.

On a GPU a small model's step is launch-bound: every dispatched operation
is a kernel launch and some host work, and every read of a tensor's value on
the host (``.item()``, ``bool(t)``, ``.tolist()``, data-dependent shapes)
makes the CPU wait for the GPU, so it can no longer queue work ahead. Both
can be counted on CPU, so they can be regression-tested without a GPU.

- :class:`OpCounter`: ATen operations dispatched (forward and backward),
  by name.
- :class:`SyncCounter`: calls that read tensor values on the host, with
  where they were made (the one list of them: :data:`SYNC_FUNCTIONS`).

``tools/benchmark.py --ops-only`` prints the first; the tests keep the
second at zero for a training step (tests/models/test_compile.py) and at
one read per epoch for ``LabelDriftHook``.
"""
import traceback
from collections import Counter
from typing import List, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ['OpCounter', 'SyncCounter', 'SYNC_FUNCTIONS']


class OpCounter(TorchDispatchMode):
    """Counts the ATen operations dispatched while active (autograd's
    backward included, when it runs inside).

    Attributes:
        ops (Counter): ``{'aten::name.overload': count}``.
    """

    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.ops.values())


#: Tensor methods and torch functions whose result is read on the host (or
#: whose output size depends on tensor values), i.e. that wait for a GPU.
SYNC_FUNCTIONS = frozenset({
    '__bool__', '__int__', '__float__', '__index__', '__complex__', 'item',
    'tolist', 'numpy', 'cpu', 'allclose', 'equal', 'nonzero', 'argwhere',
    'masked_select', 'unique', 'unique_consecutive', 'is_nonzero'
})


def _is_sync(name: str, args: tuple) -> bool:
    if name in SYNC_FUNCTIONS:
        return True
    if name == '__getitem__' and len(args) > 1:
        # Boolean-mask indexing has a data-dependent output size.
        index = args[1] if isinstance(args[1], tuple) else (args[1], )
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                   for i in index)
    if name == 'where' and len(args) == 1:
        return True  # torch.where(cond) is nonzero
    return False


class SyncCounter(TorchFunctionMode):
    """Records every call, while active, that reads tensor values on the
    host (see :data:`SYNC_FUNCTIONS`), with the line that made it.

    Attributes:
        calls (list): ``(function name, 'file:line')`` in call order.
    """

    def __init__(self):
        super().__init__()
        self.calls: List[Tuple[str, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, '__name__', '')
        if _is_sync(name, args):
            frame = traceback.extract_stack(limit=3)[0]
            self.calls.append((name, f'{frame.filename}:{frame.lineno}'))
        return func(*args, **(kwargs or {}))


def step_cost(model, data: dict) -> Tuple[OpCounter, SyncCounter]:
    """The operations and host syncs of one training step of ``model``
    (forward with the loss, and backward), on ``data`` as the model's data
    preprocessor returns it (the preprocessing is not counted)."""
    with OpCounter() as ops, SyncCounter() as syncs:
        losses = model(**data, mode='loss')
        sum(v for k, v in losses.items() if 'loss' in k).backward()
    return ops, syncs
