"""The ``tlalign_mm`` registry scope: our hooks and weight initializers,
and TL-Align's own registries, of backbone families and token rules.

Configs name them with ``_scope_='tlalign_mm'`` (e.g.
``dict(type='LastCheckpointHook', _scope_='tlalign_mm', interval=500)``,
``init_cfg=dict(type='Pretrained', _scope_='tlalign_mm', ...)``) from any
default scope (mmpretrain, mmseg, mmdet): mmengine then imports this module,
and with it the package that registers them, with no ``custom_imports``.
What extends mmpretrain itself (models, metrics, ``LabelDriftHook``) is in
mmpretrain's registries.

``FAMILIES`` and ``TOKEN_RULES`` are keyed by the import path of the class
they describe (``'mmpretrain.models.utils.attention.MultiheadAttention'``)
and looked up along a module's MRO (:mod:`tlalign_mm.models.families`,
:mod:`tlalign_mm.models.token_rules`); a downstream package registers its
own with the decorator, ``@FAMILIES.register_module('pkg.MyAttention')``.
"""
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import WEIGHT_INITIALIZERS as MMENGINE_INITIALIZERS
from mmengine.registry import Registry

__all__ = ['FAMILIES', 'HOOKS', 'SCOPE', 'TOKEN_RULES', 'WEIGHT_INITIALIZERS']

SCOPE = 'tlalign_mm'
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, scope=SCOPE)
WEIGHT_INITIALIZERS = Registry('weight initializer',
                               parent=MMENGINE_INITIALIZERS, scope=SCOPE)
#: class path -> ``describe(backbone) -> Description``
FAMILIES = Registry('TL-Align family', scope=SCOPE)
#: class path -> ``rule(module, label_map) -> labels``
TOKEN_RULES = Registry('TL-Align token rule', scope=SCOPE)
