"""Per-architecture tracers: where tokens come from and which attention
moves them. Each tracer implements ``supports``, ``num_layers``,
``initial_labels``, ``trace`` and ``readout``."""
from .pvt import PVTTracer
from .sl_swin import SLSwinTracer
from .sl_vit import SLViTTracer
from .swin import SwinTracer
from .vit import ViTTracer

# A subclass's tracer goes before its base's (first match wins).
TRACERS = [
    SLViTTracer(), ViTTracer(), SLSwinTracer(), SwinTracer(), PVTTracer()
]


def get_tracer(backbone):
    """The tracer for ``backbone``, or a clear error naming what is
    supported."""
    for tracer in TRACERS:
        if tracer.supports(backbone):
            return tracer
    names = ', '.join(type(t).__name__ for t in TRACERS)
    raise NotImplementedError(
        f'TL-Align has no tracer for {type(backbone).__name__}. Supported '
        f'tracers: {names}. Use a supported backbone or add a tracer in '
        'tlalign_mm/models/tracers/.')


__all__ = ['TRACERS', 'get_tracer', 'ViTTracer', 'SwinTracer', 'PVTTracer',
           'SLViTTracer', 'SLSwinTracer']
