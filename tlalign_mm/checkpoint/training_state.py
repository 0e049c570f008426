"""A resumed optimizer's and schedulers' state, checked against the
optimizer that loads it (:func:`~.mmengine_adapter.install` wraps
mmengine's ``OptimWrapper`` / ``AmpOptimWrapper`` and ``_ParamScheduler``
``load_state_dict``: every resume of a Runner, ours or mmengine's).

torch's ``Optimizer.load_state_dict`` takes every ``param_groups`` value
from the file (``fused``, ``maximize``, ``betas``, ``lr`` of any type) and
each parameter's state as it is: an ``exp_avg`` of shape ``(1,)`` under
``fused=True`` makes the fused kernel write past a 4-byte buffer.
mmengine's schedulers take their whole ``__dict__`` from the file. Here:

* a parameter group is the config's; from the file come only the values a
  scheduler moves (a key whose ``initial_<key>`` the config's group holds,
  those ``initial_*`` values, and Adam's ``betas[0]`` as mmengine's momentum
  schedulers keep it), finite numbers in the range the optimizer's own
  constructor accepts;
* a parameter's state has the keys one step of the config's optimizer
  gives a 2-element stand-in of the parameter's dtype and device; what the
  stand-in holds per element has the parameter's shape, the rest (``step``)
  the stand-in's, a finite number >= 0; each with the stand-in's dtype (an
  optimizer whose state is neither, Adafactor's factored rows, is
  refused);
* a scheduler's progress (:data:`PROGRESS`) comes from the file, its
  settings (``T_max``, ``param_name``, ``end``...) from the config.

What the file holds otherwise is named in one warning and not used; a state
that cannot fit is refused with a :class:`~.load.CheckpointError` naming it.
"""
import inspect
import math

import torch
from mmengine.logging import print_log

from .load import CheckpointError

#: what a scheduler's ``state_dict`` holds of the run's progress
PROGRESS = ('last_step', '_global_step', '_last_value', 'base_values')


def _refuse(problem: str) -> CheckpointError:
    return CheckpointError(f'Refused the resumed training state: {problem}')


def _shown(value) -> str:
    if torch.is_tensor(value):
        return f'a {tuple(value.shape)} {value.dtype} tensor'
    return repr(value)[:40] if type(value) in (
        str, float, bool, type(None)) or type(value) is int and \
        abs(value) < 2**63 else f'a {type(value).__name__}'


def _number(value, where: str, low: float = 0):
    """``value`` (an int, a float or a one-element tensor) as a Python
    number, finite and ``>= low``; else refused."""
    if torch.is_tensor(value) and value.numel() == 1 and \
            not value.is_complex():
        value = value.item()
    if type(value) not in (int, float) or not (math.isfinite(value)
                                               and value >= low):
        raise _refuse(f'{where} = {_shown(value)} is not a finite number '
                      f'>= {low}')
    return value


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (RuntimeError, TypeError, ValueError):  # tensors of many values
        return False


def _group(own: dict, saved, where: str, differ: list) -> dict:
    """The config's parameter group ``own`` with the values a scheduler
    moves taken from ``saved`` (the file's)."""
    if type(saved) is not dict:
        raise _refuse(f'{where} is {_shown(saved)}, not a parameter group')
    group = dict(own)
    for key in own:
        if (key.startswith('initial_') or f'initial_{key}' in own) and \
                key in saved:
            value = _number(saved[key], f"{where}['{key}']")
            group[key] = own[key].new_tensor(value) if torch.is_tensor(
                own[key]) else value
    if 'betas' in own and 'initial_momentum' in own:  # betas[0] scheduled
        group['betas'] = (group['momentum'], *own['betas'][1:])
    differ += [f"{where}['{k}'] = {_shown(v)}" for k, v in saved.items()
               if k != 'params' and not _same(v, group.get(k))]
    return group


def _template(optimizer, group: dict, param: torch.Tensor) -> dict:
    """The state one step of ``type(optimizer)`` with ``group``'s settings
    gives a 2-element stand-in of ``param``'s dtype and device (its
    constructor checks the settings' ranges)."""
    stand_in = torch.zeros(2, dtype=param.dtype, device=param.device,
                           requires_grad=True)
    stand_in.grad = torch.zeros_like(stand_in)
    accepted = inspect.signature(type(optimizer)).parameters
    settings = {k: v for k, v in group.items() if k != 'params' and (
        k in accepted or 'kwargs' in accepted)}
    try:
        dry = type(optimizer)([stand_in], **settings)
    except ValueError as error:  # torch's range checks
        raise _refuse(f'its parameter group settings {settings} are out of '
                      f'range: {error}') from None
    dry.step()
    return dict(dry.state[stand_in])


def _param_state(saved, template: dict, param, where: str,
                 extra: set) -> dict:
    """``saved``, the file's state of ``param``, as the config's optimizer
    keeps it (:func:`_template`)."""
    if type(saved) is not dict:
        raise _refuse(f'{where} is {_shown(saved)}, not a parameter state')
    if not saved:  # never stepped: the optimizer makes it
        return {}
    extra.update(set(saved) - set(template))
    kept = {}
    for key, want in template.items():
        name = f"{where}['{key}']"
        if key not in saved:
            raise _refuse(f"{name} is missing: the config's optimizer keeps "
                          'one (was the file saved with other settings, '
                          'e.g. amsgrad?)')
        value = saved[key]
        if not torch.is_tensor(want):
            kept[key] = None if want is None and value is None else \
                _number(value, name)
            continue
        shape = param.shape if want.dim() else want.shape
        if want.dim() == 0 and not torch.is_tensor(value):  # a number
            value = torch.tensor(_number(value, name), dtype=want.dtype)
        if not (torch.is_tensor(value) and value.shape == shape
                and value.dtype == want.dtype):
            raise _refuse(f'{name} is {_shown(value)}, not {tuple(shape)} '
                          f'{want.dtype} (its parameter: '
                          f'{tuple(param.shape)} {param.dtype})')
        if want.dim() == 0:
            _number(value, name)  # step: finite, >= 0
        kept[key] = value
    return kept


def optimizer_state(wrapper, saved) -> dict:
    """``saved`` (an mmengine ``OptimWrapper.state_dict()`` read from a
    file) as ``wrapper``'s optimizer, configured by the config, may load it.

    Raises:
        CheckpointError: naming the group or tensor that cannot fit.
    """
    if type(saved) is not dict:
        raise _refuse(f'its optimizer state is {_shown(saved)}')
    optimizer, differ, extra = wrapper.optimizer, [], set()
    groups, saved_groups = optimizer.param_groups, saved.get('param_groups')
    sizes = [len(g['params']) for g in groups]
    if type(saved_groups) is not list or [
            len(g.get('params', ())) if type(g) is dict else None
            for g in saved_groups] != sizes:
        raise _refuse(f'its optimizer is not the config\'s ({len(sizes)} '
                      f'parameter groups of sizes {sizes}; another model or '
                      'paramwise_cfg?)')
    ids = [i for g in saved_groups for i in g['params']]
    if any(type(i) is not int for i in ids) or len(set(ids)) != len(ids):
        raise _refuse("its param_groups' params are not distinct ints")
    new_groups = [dict(_group(own, s, f'param_groups[{n}]', differ),
                       params=s['params'])
                  for n, (own, s) in enumerate(zip(groups, saved_groups))]
    owner = {i: (n, p) for n, (g, own) in enumerate(zip(saved_groups, groups))
             for i, p in zip(g['params'], own['params'])}
    templates = {(n, p.dtype, p.device): None for n, g in enumerate(groups)
                 for p in g['params']}
    for n, dtype, device in templates:  # each group's settings checked
        templates[n, dtype, device] = _template(
            optimizer, new_groups[n], torch.empty(0, dtype=dtype,
                                                  device=device))
    state, saved_state = {}, saved.get('state', {})
    if type(saved_state) is not dict:
        raise _refuse(f"its optimizer state is {_shown(saved_state)}")
    for i, value in saved_state.items():
        if i not in owner:  # the state of no parameter
            differ.append(f'state[{_shown(i)}]')
            continue
        n, param = owner[i]
        state[i] = _param_state(value, templates[n, param.dtype,
                                                 param.device],
                                param, f'state[{i}]', extra)
    differ += [f"state[*]['{k}']" for k in sorted(map(str, extra))]
    checked = dict(saved, state=state, param_groups=new_groups)
    base = getattr(wrapper, 'base_param_settings', None)
    if 'base_param_settings' in saved:  # mmengine's, with several groups
        checked['base_param_settings'] = base if base is None else _group(
            base, saved['base_param_settings'], 'base_param_settings', differ)
    scaler = getattr(wrapper, 'loss_scaler', None)
    if 'loss_scaler' in saved and hasattr(scaler, 'state_dict'):
        checked['loss_scaler'] = _loss_scaler(scaler.state_dict(),
                                              saved['loss_scaler'], differ)
    if differ:
        print_log('Resuming: the checkpoint\'s optimizer state differs from '
                  "the config's, which is used instead: "
                  f'{", ".join(differ[:8])}{" ..." * (len(differ) > 8)}',
                  'current', 30)
    return checked


def _loss_scaler(own: dict, saved, differ: list) -> dict:
    """A ``GradScaler`` state: the config's, with the scale and growth
    tracker (the run's progress) from ``saved``."""
    if not own or type(saved) is not dict:  # disabled: loads nothing
        return own
    kept = dict(own, scale=_number(saved.get('scale'), 'loss_scaler.scale'),
                _growth_tracker=int(_number(
                    saved.get('_growth_tracker'), 'loss_scaler.tracker')))
    if kept['scale'] == 0:
        raise _refuse('loss_scaler.scale is 0')
    differ += [f'loss_scaler.{k}' for k, v in saved.items()
               if not _same(v, kept.get(k))]
    return kept


def scheduler_state(scheduler, saved) -> dict:
    """``saved`` (a ``_ParamScheduler.state_dict()`` read from a file): the
    config-built ``scheduler``'s state with the run's progress
    (:data:`PROGRESS`) taken from it.

    Raises:
        CheckpointError: a progress value of another type, length or range.
    """
    name = type(scheduler).__name__
    if type(saved) is not dict:
        raise _refuse(f'the state of {name} is {_shown(saved)}')
    own = scheduler.state_dict()
    state = dict(own)
    for key in set(PROGRESS) & set(own) & set(saved):
        value, where = saved[key], f'{name}.{key}'
        if type(own[key]) is list:
            if type(value) is not list or len(value) != len(own[key]):
                raise _refuse(f'{where} is {_shown(value)}, not a list of '
                              f'{len(own[key])} numbers')
            state[key] = [_number(v, where) for v in value]
        elif type(value) is not int:
            raise _refuse(f'{where} = {_shown(value)} is not an int')
        else:
            state[key] = _number(value, where, low=-1)
    differ = [f'{k} = {_shown(v)}' for k, v in saved.items()
              if k not in PROGRESS and not _same(v, own.get(k))]
    if differ:
        print_log(f"Resuming: the checkpoint's {name} settings differ from "
                  f"the config's, which are used instead: "
                  f'{", ".join(differ[:8])}', 'current', 30)
    return state
