"""The parameter groups: MergedParamGroupsConstructor puts the demo's
paramwise options in a few groups and makes the very same AdamW updates as
mmengine's default constructor; PlainParamGroupsHook makes mmengine's
``ConfigDict`` groups plain dicts with the same contents, so dynamo can
compile the optimizer step that mmengine's ``compile=True`` compiles with
the model's ``train_step``."""
import copy
import types

import pytest
import torch
from mmengine.config import Config, ConfigDict
from mmengine.optim import OptimWrapperDict
from mmengine.registry import HOOKS, init_default_scope
from mmpretrain.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS

import tlalign_mm  # noqa: F401  (registers the constructor and the hook)
from tests.cli import ROOT
from tlalign_mm.engine import merge_param_groups

# As the runner has it from a config: the groups are made inside the
# config's ConfigDict, which turns them into ConfigDicts.
SMALL = ConfigDict(type='OptimWrapper', paramwise_cfg=dict(
    norm_decay_mult=0.0), optimizer=dict(type='AdamW', lr=1e-3,
                                         weight_decay=0.05))


def build(model, optim_wrapper=SMALL,
          constructor='DefaultOptimWrapperConstructor'):
    cfg = copy.deepcopy(optim_wrapper)
    cfg.pop('constructor', None)
    paramwise_cfg = cfg.pop('paramwise_cfg', None)
    return OPTIM_WRAPPER_CONSTRUCTORS.build(
        dict(type=constructor, optim_wrapper_cfg=cfg,
             paramwise_cfg=paramwise_cfg))(model)


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))


def test_same_updates_in_three_groups():
    """Every parameter in a group with its own options: a decay or lr that
    differs from the default constructor's changes the weights by step 2
    (the zero-initialised biases move in step 1); a parameter left out is
    not updated; one in two groups is refused by torch."""
    init_default_scope('mmpretrain')
    cfg = Config.fromfile(
        f'{ROOT}/configs/demo/vit-tiny-p4_1xb64-cutmix_digits.py')
    assert cfg.optim_wrapper.constructor == 'MergedParamGroupsConstructor'
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    twin = copy.deepcopy(model)
    ow = cfg.optim_wrapper.to_dict()
    ow['optimizer']['fused'] = False  # compare the constructors alone
    ours = build(model, ow, 'MergedParamGroupsConstructor').optimizer
    default = build(twin, ow).optimizer
    # weights (decay 0.05); norms and biases (0); class token and position
    # embedding (0, with decay_mult)
    assert len(ours.param_groups) == 3
    for _ in range(3):
        for p, q in zip(model.parameters(), twin.parameters()):
            p.grad = torch.randn_like(p)
            q.grad = p.grad.clone()
        ours.step()
        default.step()
    for (k, p), q in zip(model.named_parameters(), twin.parameters()):
        assert torch.equal(p, q), k


def test_merge_keeps_order_and_options():
    a, b, c = (torch.nn.Parameter(torch.zeros(1)) for _ in range(3))
    groups = [dict(params=[a], lr=1.0), dict(params=[b], lr=2.0),
              dict(params=[c], lr=1.0)]
    merged = merge_param_groups(groups)
    assert [g['lr'] for g in merged] == [1.0, 2.0]
    assert merged[0]['params'] == [a, c] and merged[1]['params'] == [b]


def plain_groups(wrapper, as_dict=False):
    HOOKS.build(dict(type='PlainParamGroupsHook', _scope_='tlalign_mm')
                ).before_run(types.SimpleNamespace(optim_wrapper=(
                    OptimWrapperDict(net=wrapper) if as_dict else wrapper)))


@pytest.mark.parametrize('as_dict', [False, True])
def test_groups_become_plain_dicts_with_the_same_contents(as_dict):
    wrapper = build(small_model())
    groups = wrapper.optimizer.param_groups
    assert any(type(g) is not dict for g in groups)  # mmengine's ConfigDicts
    before = [dict(g) for g in groups]
    plain_groups(wrapper, as_dict)
    after = wrapper.optimizer.param_groups
    assert all(type(g) is dict for g in after)
    assert [g.keys() for g in after] == [g.keys() for g in before]
    for new, old in zip(after, before):
        assert all(new[k] is old[k] for k in old)  # same params, same values


def compiled_step(optimizer):
    torch._dynamo.reset()
    step = torch.compile(optimizer.step, backend='eager')
    for group in optimizer.param_groups:
        for p in group['params']:
            p.grad = torch.ones_like(p)
    step()


@pytest.mark.e2e  # dynamo: seconds
def test_the_optimizer_step_compiles_only_with_plain_groups():
    wrapper = build(small_model())
    # dynamo on ConfigDict groups (torch 2.14): if this stops raising, the
    # hook is no longer needed
    with pytest.raises(Exception, match='UserDefinedDictVariable'):
        compiled_step(wrapper.optimizer)
    plain_groups(wrapper)
    compiled_step(wrapper.optimizer)
