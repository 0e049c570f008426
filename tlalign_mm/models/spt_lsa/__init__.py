"""SPT and LSA (Lee et al. 2021, "Vision Transformer for Small-Size
Datasets") as mmpretrain components, and the SL-ViT / SL-Swin backbones.

Importing registers ``ShiftedPatchTokenization``, ``LocalitySelfAttention``,
``LocalityWindowMSA``, ``SLViT`` and ``SLSwin`` in mmpretrain's ``MODELS``,
and ``TinyImageNet`` (a class-folder dataset) in its ``DATASETS``.
"""
from .backbones import SLSwin, SLViT
from .datasets import TinyImageNet
from .lsa import LocalitySelfAttention, LocalityWindowMSA, diagonal_mask
from .spt import ShiftedPatchTokenization, shift_concat, spt_token_labels

__all__ = [
    'ShiftedPatchTokenization', 'LocalitySelfAttention', 'LocalityWindowMSA',
    'SLViT', 'SLSwin', 'spt_token_labels', 'shift_concat', 'diagonal_mask',
    'TinyImageNet'
]
