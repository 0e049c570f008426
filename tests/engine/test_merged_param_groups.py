"""MergedParamGroupsConstructor: the demo's paramwise options in a few
groups, and the very same AdamW updates as mmengine's default
constructor."""
import copy

import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS

import tlalign_mm  # noqa: F401  (registers the constructor)
from tests.tool_scripts import ROOT
from tlalign_mm.engine import merge_param_groups


def build(constructor, model, optim_wrapper):
    cfg = copy.deepcopy(optim_wrapper)
    cfg.pop('constructor', None)
    paramwise_cfg = cfg.pop('paramwise_cfg', None)
    return OPTIM_WRAPPER_CONSTRUCTORS.build(
        dict(type=constructor, optim_wrapper_cfg=cfg,
             paramwise_cfg=paramwise_cfg))(model)


def test_same_updates_in_three_groups():
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
    ours = build('MergedParamGroupsConstructor', model, ow).optimizer
    default = build('DefaultOptimWrapperConstructor', twin, ow).optimizer
    n = len(list(model.parameters()))
    assert len(default.param_groups) == n == 56
    # weights (decay 0.05); norms and biases (0); class token and position
    # embedding (0, with decay_mult)
    assert len(ours.param_groups) == 3
    decay = {id(p): g['weight_decay'] for g in ours.param_groups
             for p in g['params']}
    names = {id(p): k for k, p in model.named_parameters()}
    assert len(decay) == n
    twin_decay = {k: g['weight_decay'] for g in default.param_groups
                  for p in g['params']
                  for k, q in twin.named_parameters() if q is p}
    assert {names[i]: d for i, d in decay.items()} == twin_decay
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
