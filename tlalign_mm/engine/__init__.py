"""Registered mmengine components: hooks and an optimizer constructor."""
from .label_drift_hook import LabelDriftHook

__all__ = ['LabelDriftHook']
