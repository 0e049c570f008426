"""The alignment options, checked where they are given (the classifier's
``align_cfg``, :func:`tlalign_mm.align_labels`, the analyses) and passed on
as one object."""
from dataclasses import dataclass, fields
from typing import Iterable, Mapping, Optional, Set, Union

from .attention import IMPLS

AlignLayers = Union[str, Iterable[int], None]


class OptionError(TypeError, ValueError):
    """An alignment option that is not what it must be (a TypeError or a
    ValueError, as numpy's ``AxisError``; the tools print it as one
    ``error:`` line)."""


@dataclass(frozen=True)
class AlignOptions:
    """The rule's options (see :mod:`tlalign_mm.core.alignment`), checked
    when built: an ``AlignOptions`` is always a valid one, so it travels
    from the config to :func:`~tlalign_mm.core.align` by name, unpacked by
    no one and checked once.

    Attributes:
        align_layers: ``'all'``, ``'last'`` or the block indices that align
            (the paper's Table 8); other blocks leave labels alone.
        residual_norm (bool): ``(Y + Ā Y) / 2`` (the paper's) or ``Ā Y``.
        follow_drop_path (bool): a sample whose attention branch drop-path
            removed keeps its labels in that block; ``False`` ignores
            drop-path, like the original code.
        impl (str): how ``Ā Y`` is computed from recorded queries and keys
            (:func:`~tlalign_mm.core.head_mean_attention`: ``'auto'``,
            ``'sdpa'``, ``'triton'``, ``'explicit'``); the same labels to
            float32 rounding, a different cost.
    """
    align_layers: AlignLayers = 'all'
    residual_norm: bool = True
    follow_drop_path: bool = True
    impl: str = 'auto'

    def __post_init__(self):
        for name in ('residual_norm', 'follow_drop_path'):
            if not isinstance(getattr(self, name), bool):
                raise OptionError(f'TL-Align option {name} must be True '
                                  f'or False, got {getattr(self, name)!r}.')
        if not isinstance(self.impl, str) or self.impl not in IMPLS:
            raise OptionError(f'TL-Align option impl must be one of '
                              f'{IMPLS}, got {self.impl!r}.')
        if isinstance(self.align_layers, Iterable) and \
                not isinstance(self.align_layers, str):
            # a list from a config: kept as a tuple (immutable, read once)
            object.__setattr__(self, 'align_layers',
                               tuple(self.align_layers))
        resolve_align_layers(self.align_layers)


def align_options(cfg: Union[Mapping, AlignOptions, None] = None
                  ) -> AlignOptions:
    """``cfg`` (a dict of some of :class:`AlignOptions`' fields, or one)
    checked: anything but a mapping is refused, unknown keys are refused
    with the known ones named, the switches must be bools (a string
    ``'no'`` is not ``False``), ``align_layers`` as
    :func:`resolve_align_layers` accepts; :class:`OptionError` names what
    is not."""
    if isinstance(cfg, AlignOptions):
        return cfg
    known = [f.name for f in fields(AlignOptions)]
    if cfg is not None and not isinstance(cfg, Mapping):
        raise OptionError(f'TL-Align options (align_cfg) must be a dict '
                          f'of {known}, got {cfg!r}.')
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(known))
    if unknown:
        raise OptionError(f'Unknown TL-Align options {unknown}; known: '
                          f'{known}.')
    return AlignOptions(**cfg)


def resolve_align_layers(align_layers: AlignLayers,
                         num_layers: Optional[int] = None
                         ) -> Optional[Set[int]]:
    """The set of block indices that align (``None``: all) from ``'all'``
    (or ``None``), ``'last'`` or a non-empty list of indices (negative from
    the end; ``num_layers`` resolves them and checks the range); an
    :class:`OptionError` naming the value and what is accepted otherwise."""
    if align_layers is None or (isinstance(align_layers, str)
                                and align_layers == 'all'):
        return None
    if isinstance(align_layers, str) and align_layers == 'last':
        align_layers = [-1]
    accepted = ("align_layers must be 'all', 'last' or a non-empty list of "
                'block indices (ints; negative ones count from the end)')
    if isinstance(align_layers, str) or not isinstance(
            align_layers, Iterable):
        raise OptionError(f'{accepted}; got {align_layers!r}.')
    align_layers = list(align_layers)
    if not align_layers:
        raise OptionError(f'{accepted}; got an empty list, which would '
                          'align nothing.')
    indices = set()
    for i in align_layers:
        if isinstance(i, bool) or not isinstance(i, int):
            raise OptionError(f'{accepted}; got {i!r} in {align_layers!r}.')
        if i < 0 and num_layers is not None:
            i += num_layers
        if num_layers is not None and not 0 <= i < num_layers:
            raise OptionError(f'align_layers index {i} is out of range for '
                              f'a model with {num_layers} blocks.')
        indices.add(i)
    return indices
