"""A resumed optimizer and scheduler state is checked against the optimizer
that loads it (``tlalign_mm.checkpoint.training_state``, installed into
mmengine's ``OptimWrapper`` and ``_ParamScheduler``): the flags are the
config's, a state that cannot fit is refused naming the tensor. (The same
through mmengine's Runner, with the fused kernel's heap overflow:
tests/crafted_checkpoints.py, ``RUNS``.)"""
import copy
import types

import pytest
import torch
from mmengine.optim import OptimWrapper
from mmengine.optim.scheduler import CosineAnnealingLR, LinearLR

from tlalign_mm.checkpoint import CheckpointError, install
from tlalign_mm.checkpoint import training_state as ts

install()


def _step(model, wrapper, schedulers, k):
    data = torch.randn(5, 4, generator=torch.Generator().manual_seed(k))
    wrapper.update_params(model(data.to(model[0].weight.device)).square(
    ).sum())
    for scheduler in schedulers:
        scheduler.step()


def _trained(kind='AdamW', steps=2, device='cpu', **settings):
    """A 2-layer model, its OptimWrapper and two LR schedulers, after
    ``steps`` steps."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(
        3, 2)).to(device)
    wrapper = OptimWrapper(getattr(torch.optim, kind)(
        model.parameters(), **dict(dict(lr=0.1), **settings)))
    schedulers = [LinearLR(wrapper, start_factor=0.5, end=2, by_epoch=False),
                  CosineAnnealingLR(wrapper, T_max=5, begin=2,
                                    by_epoch=False)]
    for k in range(steps):
        _step(model, wrapper, schedulers, k)
    return model, wrapper, schedulers


def _saved(kind='AdamW', **settings):
    """What a checkpoint after 2 steps holds: weights, optimizer and
    scheduler states."""
    model, wrapper, schedulers = _trained(kind, 2, **settings)
    return copy.deepcopy((model.state_dict(), wrapper.state_dict(),
                          [s.state_dict() for s in schedulers]))


def _resumed(saved, kind='AdamW', **settings):
    """A fresh run of the same config resuming ``saved`` (mmengine's
    order: schedulers built, then the optimizer's state, then theirs)."""
    model, wrapper, schedulers = _trained(kind, 0, **settings)
    weights, optimizer_state, scheduler_states = copy.deepcopy(saved)
    model.load_state_dict(weights)
    wrapper.load_state_dict(optimizer_state)
    for scheduler, state in zip(schedulers, scheduler_states):
        scheduler.load_state_dict(state)
    return model, wrapper, schedulers


def _logged(monkeypatch):
    messages = []
    monkeypatch.setattr(ts, 'print_log', lambda m, *a, **k: messages.append(m))
    return messages


def test_install_wraps_each_load_once():
    install()  # twice: the module's import installed it
    assert OptimWrapper.load_state_dict.checked.__qualname__ == \
        'BaseOptimWrapper.load_state_dict'
    assert LinearLR.load_state_dict.checked.__qualname__ == \
        '_ParamScheduler.load_state_dict'


def test_own_state_resumes_exactly_without_a_warning(monkeypatch):
    """Resumed after 2 steps, 2 more steps give the weights of 4."""
    logged = _logged(monkeypatch)
    run = _resumed(_saved())
    for k in (2, 3):
        _step(*run, k)
    assert logged == []
    uninterrupted = _trained(steps=4)[0]
    for got, want in zip(run[0].parameters(), uninterrupted.parameters()):
        assert torch.equal(got, want)


def test_flags_come_from_the_config_named_in_one_warning(monkeypatch):
    """maximize, amsgrad, fused, foreach, betas=(1, 1) and settings no
    scheduler moves are the config's: the run trains as an untampered
    resume, and the state amsgrad would use is left out."""
    clean = _saved()
    tampered = copy.deepcopy(clean)
    for group in tampered[1]['param_groups']:
        group.update(maximize=True, amsgrad=True, fused=True, foreach=True,
                     betas=(1, 1), weight_decay=-3.0, differentiable=True)
    for state in tampered[1]['state'].values():
        state['max_exp_avg_sq'] = torch.zeros_like(state['exp_avg'])
    tampered[2][1].update(T_max=0, param_name='maximize')
    logged = _logged(monkeypatch)
    runs = [_resumed(saved) for saved in (clean, tampered)]
    assert len(logged) == 2, logged
    assert all(f"param_groups[0]['{k}']" in logged[0] for k in (
        'maximize', 'amsgrad', 'fused', 'foreach', 'betas', 'weight_decay',
        'differentiable')) and "state[*]['max_exp_avg_sq']" in logged[0]
    assert 'CosineAnnealingLR' in logged[1] and 'T_max = 0' in logged[1]
    for model, wrapper, schedulers in runs:
        group = wrapper.optimizer.param_groups[0]
        assert (group['maximize'], group['amsgrad'], group['betas']) == (
            False, False, (0.9, 0.999))
        assert (schedulers[1].T_max, schedulers[1].param_name) == (5, 'lr')
        _step(model, wrapper, schedulers, 2)
    for clean_weight, weight in zip(*(m.parameters() for m, _, _ in runs)):
        assert torch.equal(clean_weight, weight)


def _tamper(saved, where, value):
    """``saved`` with the value at the path ``where`` replaced (KeyError:
    removed)."""
    saved = copy.deepcopy(saved)
    *path, key = where
    target = saved
    for part in path:
        target = target[part]
    if value is KeyError:
        del target[key]
    else:
        target[key] = value
    return saved


@pytest.mark.parametrize('where, value, refusal', [
    # the fused kernel's heap overflow (fused=True from the file)
    ((1, 'state', 0, 'exp_avg'), torch.zeros(1),
     r"state\[0\]\['exp_avg'\] is a \(1,\) torch.float32 tensor, not "
     r'\(3, 4\) torch.float32 \(its parameter: \(3, 4\) torch.float32\)'),
    ((1, 'state', 1, 'exp_avg_sq'), torch.zeros(3, dtype=torch.float64),
     r"state\[1\]\['exp_avg_sq'\] is a \(3,\) torch.float64"),
    ((1, 'state', 0, 'step'), torch.tensor(-1.0),
     r"state\[0\]\['step'\] = -1.0 is not a finite number >= 0"),
    ((1, 'state', 0, 'step'), float('nan'), r"'step'\] = nan is not"),
    ((1, 'state', 2, 'exp_avg_sq'), KeyError,
     r"state\[2\]\['exp_avg_sq'\] is missing"),
    ((1, 'state', 2), 'x', r"state\[2\] is 'x', not a parameter state"),
    # lr is moved by the schedulers: the file's, checked
    ((1, 'param_groups', 0, 'lr'), '0.1',
     r"param_groups\[0\]\['lr'\] = '0.1' is not a finite number"),
    ((1, 'param_groups', 0, 'lr'), float('inf'), r"\['lr'\] = inf"),
    ((1, 'param_groups', 0, 'initial_lr'), -1.0, r"'initial_lr'\] = -1.0"),
    ((1, 'param_groups', 0, 'params'), [0, 0, 1, 2],
     'params are not distinct ints'),
    ((1, 'param_groups', 0, 'params'), [0, 1],
     r"not the config's \(1 parameter groups of sizes \[4\]"),
    ((2, 0, 'last_step'), -5, r'LinearLR.last_step = -5 is not a finite'),
    ((2, 0, 'last_step'), 2.0, r'LinearLR.last_step = 2.0 is not an int'),
    ((2, 1, '_last_value'), [0.1, 0.2],
     r'CosineAnnealingLR._last_value is a list, not a list of 1 numb'),
])
def test_a_state_that_cannot_fit_is_refused_naming_it(where, value, refusal):
    saved = _saved(fused=True)
    with pytest.raises(CheckpointError, match=refusal) as error:
        _resumed(_tamper(saved, where, value), fused=True)
    assert str(error.value).startswith('Refused the resumed training state')
    assert '\n' not in str(error.value)


def test_sgd_momentum_buffer_and_a_negative_lr():
    saved = _saved('SGD', momentum=0.9)
    with pytest.raises(CheckpointError, match=r"state\[3\]\['momentum_buff"
                       r"er'\] is a \(1,\) .*, not \(2,\)"):
        _resumed(_tamper(saved, (1, 'state', 3, 'momentum_buffer'),
                         torch.zeros(1)), 'SGD', momentum=0.9, fused=True)
    with pytest.raises(CheckpointError, match=r"param_groups\[0\]\['lr'\] = "
                       '-0.5 is not a finite number >= 0'):
        _resumed(_tamper(saved, (1, 'param_groups', 0, 'lr'), -0.5), 'SGD',
                 momentum=0.9)


def test_a_momentum_schedule_moves_adams_first_beta():
    """mmengine's momentum schedulers keep Adam's betas[0] as 'momentum':
    resumed from the file (the rest of betas is the config's)."""
    from mmengine.optim.scheduler import CosineAnnealingMomentum
    wrapper = OptimWrapper(torch.optim.Adam([torch.nn.Parameter(
        torch.ones(2))], lr=0.1, betas=(0.9, 0.99)))
    CosineAnnealingMomentum(wrapper, T_max=4, by_epoch=False)
    saved = copy.deepcopy(wrapper.state_dict())
    saved['param_groups'][0].update(momentum=0.5, betas=(0.5, 0.3))
    state = ts.optimizer_state(wrapper, saved)
    assert state['param_groups'][0]['betas'] == (0.5, 0.99)
    # the range of the optimizer's own constructor
    saved['param_groups'][0].update(momentum=1.0)
    with pytest.raises(CheckpointError, match='out of range: Invalid beta '
                       'parameter at index 0: 1.0'):
        ts.optimizer_state(wrapper, saved)


def test_loss_scaler_keeps_the_scale_and_the_configs_factors(monkeypatch):
    logged = _logged(monkeypatch)
    _, wrapper, _ = _trained()
    scaler = torch.amp.GradScaler('cpu', init_scale=8.0)  # as AmpOptimWrapper
    saved = dict(copy.deepcopy(wrapper.state_dict()), loss_scaler=dict(
        scaler.state_dict(), scale=2.0, growth_factor=1e9))
    amp = types.SimpleNamespace(optimizer=wrapper.optimizer,
                                loss_scaler=scaler)
    kept = ts.optimizer_state(amp, saved)['loss_scaler']
    assert (kept['scale'], kept['growth_factor']) == (2.0, 2.0)
    assert 'loss_scaler.growth_factor' in logged[0]
    with pytest.raises(CheckpointError, match='loss_scaler.scale = nan'):
        ts.optimizer_state(amp, dict(saved, loss_scaler=dict(
            saved['loss_scaler'], scale=float('nan'))))


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
@pytest.mark.parametrize('settings', [dict(fused=True),
                                      dict(capturable=True)])
def test_cuda_fused_and_capturable_states(settings):
    """On the GPU (the fused kernel, a step tensor on the device): the run's
    own state resumes exactly, an exp_avg of shape (1,) is refused."""
    saved = _saved(device='cuda', **settings)
    run = _resumed(saved, device='cuda', **settings)
    _step(*run, 2)
    uninterrupted = _trained(steps=3, device='cuda', **settings)[0]
    for got, want in zip(run[0].parameters(), uninterrupted.parameters()):
        assert torch.equal(got, want)
    with pytest.raises(CheckpointError, match=r"\['exp_avg'\] is a \(1,\)"):
        _resumed(_tamper(saved, (1, 'state', 0, 'exp_avg'), torch.zeros(
            1, device='cuda')), device='cuda', **settings)


def test_multistep_milestones_resume_as_configured(tmp_path, monkeypatch):
    """plain.py wrote MultiStepLR's ``Counter({2: 1})`` as ``Counter({(2,
    1): 1})`` (``Counter(pairs)`` counts the pairs), and load() dropped it
    with a warning: now a dict, loaded and resumed without one."""
    from mmengine.optim.scheduler import MultiStepLR

    from tlalign_mm.checkpoint import load
    from tlalign_mm.checkpoint.plain import plain_checkpoint
    logged = _logged(monkeypatch)
    wrapper = OptimWrapper(torch.optim.SGD([torch.nn.Parameter(
        torch.ones(2))], lr=1.0))
    scheduler = MultiStepLR(wrapper, milestones=[2], by_epoch=False)
    ckpt = dict(state_dict={}, param_schedulers=[scheduler.state_dict()])
    plain_checkpoint(ckpt)
    torch.save(ckpt, tmp_path / 'x.pth')
    saved = load(tmp_path / 'x.pth')['param_schedulers'][0]
    assert saved['milestones'] == {2: 1}
    scheduler.load_state_dict(saved)
    assert logged == [] and scheduler.milestones == {2: 1}
