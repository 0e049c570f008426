"""PlainParamGroupsHook: the parameter groups mmengine builds (ConfigDicts)
become plain dicts with the same contents, so dynamo can compile the
optimizer step that mmengine's ``compile=True`` compiles with the model's
``train_step``."""
import types

import pytest
import torch
from mmengine.config import ConfigDict
from mmengine.optim import OptimWrapperDict
from mmengine.registry import HOOKS, OPTIM_WRAPPER_CONSTRUCTORS

import tlalign_mm.engine  # noqa: F401  (registers the hook)


def optim_wrapper(model):
    """As the runner builds it from a config: the groups are made inside
    the config's ``ConfigDict``, which turns them into ``ConfigDict``s."""
    return OPTIM_WRAPPER_CONSTRUCTORS.build(dict(
        type='DefaultOptimWrapperConstructor',
        optim_wrapper_cfg=ConfigDict(type='OptimWrapper', optimizer=dict(
            type='AdamW', lr=1e-3, weight_decay=0.05)),
        paramwise_cfg=dict(norm_decay_mult=0.0)))(model)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4),
                               torch.nn.LayerNorm(4))


def compiled_step(optimizer):
    torch._dynamo.reset()
    step = torch.compile(optimizer.step, backend='eager')
    for group in optimizer.param_groups:
        for p in group['params']:
            p.grad = torch.ones_like(p)
    step()


@pytest.mark.parametrize('as_dict', [False, True])
def test_groups_become_plain_dicts_with_the_same_contents(as_dict):
    net = model()
    wrapper = optim_wrapper(net)
    groups = wrapper.optimizer.param_groups
    assert any(type(g) is not dict for g in groups)  # mmengine's ConfigDicts
    before = [dict(g) for g in groups]
    runner = types.SimpleNamespace(
        optim_wrapper=OptimWrapperDict(net=wrapper) if as_dict else wrapper)
    hook = HOOKS.build(dict(type='PlainParamGroupsHook',
                            _scope_='tlalign_mm'))
    hook.before_run(runner)
    after = wrapper.optimizer.param_groups
    assert all(type(g) is dict for g in after)
    assert [g.keys() for g in after] == [g.keys() for g in before]
    for new, old in zip(after, before):
        assert all(new[k] is old[k] for k in old)  # same params, same values


@pytest.mark.e2e  # dynamo: seconds
def test_the_optimizer_step_compiles_only_with_plain_groups():
    wrapper = optim_wrapper(model())
    # dynamo on ConfigDict groups (torch 2.14): if this stops raising, the
    # hook is no longer needed
    with pytest.raises(Exception, match='UserDefinedDictVariable'):
        compiled_step(wrapper.optimizer)
    HOOKS.build(dict(type='PlainParamGroupsHook', _scope_='tlalign_mm'
                     )).before_run(types.SimpleNamespace(optim_wrapper=wrapper))
    compiled_step(wrapper.optimizer)
