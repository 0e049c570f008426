"""Importing this module routes every checkpoint mmengine loads through
:func:`tlalign_mm.checkpoint.load`; a config run by another launcher opts
in with one line::

    custom_imports = dict(
        imports=['tlalign_mm', 'tlalign_mm.checkpoint.install'])
"""
from .mmengine_adapter import install

install()
