"""Let ``torch.compile`` trace the optimizer step of mmengine's runner."""
from mmengine.hooks import Hook
from mmengine.optim import OptimWrapperDict

from tlalign_mm.registry import HOOKS


@HOOKS.register_module()
class PlainParamGroupsHook(Hook):
    """Make the optimizer's parameter groups plain ``dict``s before training.

    mmengine builds them as ``ConfigDict``s, and with ``compile=True``
    dynamo (torch 2.14) fails on that ``dict`` subclass in the compiled
    optimizer step (``'UserDefinedDictVariable' object has no attribute
    'items'``). Keys, values and the schedulers are unaffected.

    Use it with ``compile``::

        compile = True
        custom_hooks = [
            dict(type='PlainParamGroupsHook', _scope_='tlalign_mm')
        ]
    """

    priority = 'VERY_HIGH'

    def before_run(self, runner) -> None:
        optim_wrapper = runner.optim_wrapper
        wrappers = optim_wrapper.values() if isinstance(
            optim_wrapper, OptimWrapperDict) else [optim_wrapper]
        for wrapper in wrappers:
            groups = wrapper.optimizer.param_groups
            groups[:] = [g if type(g) is dict else dict(g) for g in groups]
