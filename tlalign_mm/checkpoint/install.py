"""Importing this module runs :func:`tlalign_mm.checkpoint.install`; a
config run by any launcher opts in with
``custom_imports = dict(imports=['tlalign_mm',
'tlalign_mm.checkpoint.install'])``.

The import binds ``tlalign_mm.checkpoint.install`` to this module (a
package attribute per submodule), so the module is made callable.
"""
import sys
import types

from .mmengine_adapter import install

install()
sys.modules[__name__].__class__ = type(
    'CallableModule', (types.ModuleType, ), dict(__call__=lambda _: install()))
