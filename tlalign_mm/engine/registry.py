"""Registry of the ``tlalign_mm.engine`` scope: the training-loop hooks.

Configs name them with ``_scope_='tlalign_mm.engine'`` (e.g.
``dict(type='LastCheckpointHook', _scope_='tlalign_mm.engine',
interval=500)``); mmengine then imports this module and, through
``locations``, the package that registers them, from any default scope
(mmpretrain, mmseg, mmdet), with no ``custom_imports`` needed.
"""
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import Registry

__all__ = ['HOOKS', 'SCOPE']

SCOPE = 'tlalign_mm.engine'

HOOKS = Registry(
    'hook', parent=MMENGINE_HOOKS, scope=SCOPE,
    locations=['tlalign_mm.checkpoint.hooks', SCOPE])
