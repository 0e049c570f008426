"""Datasets that mmpretrain lacks."""
from .digits import Digits

__all__ = ['Digits']
