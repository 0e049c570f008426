"""The checkpoint hooks ``tools/train.py`` and ``tools/test.py`` add to
every config they run."""
from mmengine.config import Config

from .registry import SCOPE

__all__ = ['add_checkpoint_safety_hooks']


def add_checkpoint_safety_hooks(cfg: Config, training: bool) -> Config:
    """Append :class:`~tlalign_mm.engine.StrictLoadHook` (and, for
    training, :class:`~tlalign_mm.engine.SafeResumeHook`) to
    ``cfg.custom_hooks``, unless the config lists them already.

    ``StrictLoadHook``'s ``strict`` is the config's ``strict_load``
    (default True; ``--cfg-options strict_load=False`` loads only the
    tensors that fit, with mmengine's warning).
    """
    strict = cfg.get('strict_load', True)
    if not isinstance(strict, bool):
        raise TypeError(f'strict_load must be True or False, got {strict!r}')
    hooks = list(cfg.get('custom_hooks', None) or [])
    present = {h.get('type') for h in hooks if isinstance(h, dict)}
    wanted = [dict(type='StrictLoadHook', _scope_=SCOPE, strict=strict)]
    if training:
        wanted.append(dict(type='SafeResumeHook', _scope_=SCOPE))
    hooks += [h for h in wanted if h['type'] not in present]
    cfg.custom_hooks = hooks
    return cfg
