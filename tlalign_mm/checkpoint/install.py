"""Importing this module routes every checkpoint mmengine loads through
:func:`tlalign_mm.checkpoint.load` and keeps auto-resume inside the work dir
(:func:`tlalign_mm.checkpoint.install`); a config run by any launcher opts
in with one line::

    custom_imports = dict(
        imports=['tlalign_mm', 'tlalign_mm.checkpoint.install'])

The import binds ``tlalign_mm.checkpoint.install`` to this module (Python
sets a package attribute for each submodule), so the module is callable:
``tlalign_mm.checkpoint.install()`` stays the function it names.
"""
import sys
import types

from .mmengine_adapter import install

install()
sys.modules[__name__].__class__ = type(
    'CallableModule', (types.ModuleType, ), dict(__call__=lambda _: install()))
