"""The alignment options, checked where they are given (the classifier's
``align_cfg``, :func:`tlalign_mm.align_labels`, the analyses)."""
from typing import Iterable, Mapping, NamedTuple, Optional, Set, Union

AlignLayers = Union[str, Iterable[int], None]


class OptionError(TypeError, ValueError):
    """An alignment option that is not what it must be (a TypeError or a
    ValueError, as numpy's ``AxisError``; the tools print it as one
    ``error:`` line)."""


class AlignOptions(NamedTuple):
    """The rule's options (see :mod:`tlalign_mm.core.alignment`).

    Attributes:
        align_layers: ``'all'``, ``'last'`` or the block indices that align
            (the paper's Table 8); other blocks leave labels alone.
        residual_norm (bool): ``(Y + Ā Y) / 2`` (the paper's) or ``Ā Y``.
        follow_drop_path (bool): a sample whose attention branch drop-path
            removed keeps its labels in that block; ``False`` ignores
            drop-path, like the original code.
    """
    align_layers: AlignLayers = 'all'
    residual_norm: bool = True
    follow_drop_path: bool = True


def align_options(cfg: Optional[Mapping] = None) -> AlignOptions:
    """``cfg`` (a dict of some of :class:`AlignOptions`' fields) checked:
    unknown keys are refused with the known ones named, the switches must
    be bools (a string ``'no'`` is not ``False``), ``align_layers`` as
    :func:`resolve_align_layers` accepts; :class:`OptionError` names what
    is not."""
    if not isinstance(cfg, (Mapping, type(None))):
        raise OptionError(f'align_cfg must be a dict of some of '
                          f'{list(AlignOptions._fields)}, got {cfg!r}.')
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(AlignOptions._fields))
    if unknown:
        raise OptionError(f'Unknown TL-Align options {unknown}; known: '
                          f'{list(AlignOptions._fields)}.')
    for name in ('residual_norm', 'follow_drop_path'):
        if not isinstance(cfg.get(name, True), bool):
            raise OptionError(f'TL-Align option {name} must be True or '
                              f'False, got {cfg[name]!r}.')
    resolve_align_layers(cfg.get('align_layers', 'all'))
    return AlignOptions(**cfg)


def resolve_align_layers(align_layers: AlignLayers,
                         num_layers: Optional[int] = None
                         ) -> Optional[Set[int]]:
    """The set of block indices that align (``None``: all) from ``'all'``
    (or ``None``), ``'last'`` or a non-empty list of indices (negative from
    the end; ``num_layers`` resolves them and checks the range); a
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
