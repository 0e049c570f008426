"""Registry of the ``tlalign_mm.downstream`` scope.

mmengine imports ``<scope>.registry`` when a config switches to a scope
(``_scope_='tlalign_mm.downstream'``), so building the strict ``Pretrained``
works even when nothing imported this package before.
"""
from .strict_pretrained import SCOPE, WEIGHT_INITIALIZERS

__all__ = ['SCOPE', 'WEIGHT_INITIALIZERS']
