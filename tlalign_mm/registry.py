"""The ``tlalign_mm`` registry scope: our hooks and weight initializers.

Configs name them with ``_scope_='tlalign_mm'`` (e.g.
``dict(type='LastCheckpointHook', _scope_='tlalign_mm', interval=500)``,
``init_cfg=dict(type='Pretrained', _scope_='tlalign_mm', ...)``) from any
default scope (mmpretrain, mmseg, mmdet): mmengine then imports this module,
and with it the package that registers them, with no ``custom_imports``.
What extends mmpretrain itself (models, metrics, ``LabelDriftHook``) is in
mmpretrain's registries.
"""
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import WEIGHT_INITIALIZERS as MMENGINE_INITIALIZERS
from mmengine.registry import Registry

__all__ = ['HOOKS', 'SCOPE', 'WEIGHT_INITIALIZERS']

SCOPE = 'tlalign_mm'
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, scope=SCOPE)
WEIGHT_INITIALIZERS = Registry('weight initializer',
                               parent=MMENGINE_INITIALIZERS, scope=SCOPE)
