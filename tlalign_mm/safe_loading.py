"""Importing this module routes every mmengine checkpoint scheme through
:mod:`tlalign_mm.checkpoint_safety`'s weights-only loaders.

``import tlalign_mm`` only allow-lists the types OpenMMLab checkpoints hold
(so ``torch.load(weights_only=True)`` reads them); it leaves mmengine's
loaders alone. ``tools/train.py`` and ``tools/test.py`` install the safe
loaders themselves; a config run by another launcher opts in with::

    custom_imports = dict(imports=['tlalign_mm', 'tlalign_mm.safe_loading'])

See :func:`tlalign_mm.checkpoint_safety.install_safe_loaders`.
"""
from .checkpoint_safety import install_safe_loaders

install_safe_loaders()
