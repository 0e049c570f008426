"""SPT and LSA (Lee et al. 2021, "Vision Transformer for Small-Size
Datasets") as mmpretrain components, and the SL-ViT / SL-Swin backbones.

Importing registers ``ShiftedPatchTokenization``, ``LocalitySelfAttention``,
``LocalityWindowMSA``, ``SLViT`` and ``SLSwin`` in mmpretrain's ``MODELS``
(``TinyImageNet``, for their recipes, is in :mod:`tlalign_mm.datasets`).
"""
from .backbones import SLSwin, SLViT
from .lsa import LocalitySelfAttention, LocalityWindowMSA, diagonal_mask
from .spt import ShiftedPatchTokenization, shift_concat, spt_token_labels

__all__ = [
    'ShiftedPatchTokenization', 'LocalitySelfAttention', 'LocalityWindowMSA',
    'SLViT', 'SLSwin', 'spt_token_labels', 'shift_concat', 'diagonal_mask'
]
