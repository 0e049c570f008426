"""A schedule that does not fit its run fails before the Runner is built,
naming the warm-up and how to shrink it (mmengine gives a scheduler without
``end`` the run's length, and a run no longer than the warm-up fails deep
in the Runner with ``end should be larger than begin``)."""
from typing import Mapping

__all__ = ['check_schedule']


def check_schedule(cfg: Mapping) -> None:
    """Raise ``ValueError`` if a ``param_scheduler`` of ``cfg``, in the
    train loop's unit, would end at or before it begins."""
    loop = cfg.get('train_cfg') or {}
    key = 'max_epochs' if 'max_epochs' in loop else 'max_iters'
    length, unit, by_epoch = loop.get(key), key[4:-1], key == 'max_epochs'
    schedulers = cfg.get('param_scheduler') or []
    if isinstance(schedulers, Mapping):
        schedulers = [schedulers]
    for i, s in enumerate(schedulers):
        begin = s.get('begin', 0)
        if length is None or s.get('by_epoch', True) != by_epoch or s.get(
                'end', length) > begin:
            continue
        warm = {j: w for j, w in enumerate(schedulers) if j != i and w.get(
            'end') == begin and w.get('by_epoch', True) == by_epoch}
        raise ValueError(
            f'param_scheduler.{i} ({s["type"]}) begins at {unit} {begin}, '
            'after the warm-up (' + ', '.join(
                f'param_scheduler.{j}: {w["type"]}, {unit}s '
                f'{w.get("begin", 0)}-{begin}' for j, w in warm.items()) +
            f'), but train_cfg.{key}={length} ends the run by then. Give '
            f'the run more {unit}s than the warm-up, or shrink the warm-up '
            f'with it, e.g. --cfg-options train_cfg.{key}={max(length, 2)} '
            + ''.join(f'param_scheduler.{j}.end=1 ' for j in warm) +
            f'param_scheduler.{i}.begin=1')
