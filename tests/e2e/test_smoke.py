"""tools/smoke.py (:mod:`tlalign_mm.testing.smoke`): configs from configs/
and a user's mmpretrain config with the TL-Align line run two training
iterations and one validation step (a test config: one test step) on tiny
synthetic data, in this process.

By default one config per model family and task kind runs (:data:`SMOKE`,
CutMix and TL-Align both among them); ``TLALIGN_SMOKE_ALL=1`` runs every
config found by glob (about 340 CPU seconds, most of it the base-size
models). The TL-Align and CutMix twins differ only in the classifier or,
downstream, in the checkpoint (tests/test_configs.py), which smoke drops.
The runs are quick (tests/e2e/conftest.py)."""
import glob
import json
import math
import os
import os.path as osp

import pytest
import torch

from tlalign_mm.testing.configs import ROOT, config_paths
from tlalign_mm.testing.smoke import smoke

DEIT = 'mmpretrain::deit/deit-tiny_4xb256_in1k.py'
SMOKE_SET = [
    'tlalign/deit-tiny_4xb256-tlalign_in1k.py',  # ViT, Mixup + CutMix
    'tlalign/deit-tiny_8xb128-amp-paper-cutmix_in1k.py',  # token CutMix
    'tlalign/swin-tiny_16xb64-cutmix_in1k.py',
    'tlalign/pvt-tiny_8xb128-tlalign_in1k.py',
    'tlalign/beit-base-p16_8xb128-coslr-100e-tlalign_in1k.py',
    'tlalign/swinv2-tiny-w8_16xb64-tlalign_in1k-256px.py',
    'tlalign/deit-small-timm_4xb256-tlalign_in1k.py',
    'sl_vit/sl-swin_1xb128-tlalign_tiny-imagenet.py',
    'sl_vit/sl-vit_1xb128-cutmix_cifar100.py',
    'upernet/upernet_deit-small-p16-ln-mln_tlalign-in1k-pre_8xb2-160k_'
    'ade20k-512x512.py',
    'cascade_mask_rcnn/cascade-mask-rcnn_swin-tiny-p4-w7_cutmix-in1k-pre_'
    'fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',
    'transfer/deit-tiny_tlalign-in1k-pre_8xb96-1000e_flowers102.py',
    'robustness/deit-tiny_in1k_test-imagenet-c.py',
    'demo/sl-vit-tiny-p4_1xb64-tlalign_digits.py',
]
ALL = [osp.relpath(p, 'configs') for p in config_paths()]


def check(result: dict, test: bool) -> None:
    if test:
        assert result['steps'] == dict(train=0, val=0, test=1)
    else:
        assert result['steps'] == dict(train=2, val=1, test=0)
        assert all(math.isfinite(loss) for loss in result['losses'])
    assert result['metrics'], 'the evaluator reported nothing'


@pytest.mark.e2e
@pytest.mark.parametrize('config', ALL if os.environ.get(
    'TLALIGN_SMOKE_ALL') == '1' else SMOKE_SET)
def test_config(config, tmp_path):
    result = smoke(osp.join(ROOT, 'configs', config), work_dir=str(tmp_path))
    check(result, config.startswith('robustness'))


@pytest.mark.e2e
@pytest.mark.parametrize('recipe', ['deit/deit-tiny_4xb256_in1k.py',
                                    'swin_transformer/swin-tiny_16xb64_in1k.py'])
def test_an_mmpretrain_recipe_plus_the_one_line_trains_with_tlalign(
        tmp_path, recipe):
    """mmpretrain's own DeiT-T / Swin-T config with ``model =
    dict(type='TLAlignClassifier')``: the recipe's ``Mixup``/``CutMix``
    are mixed by their recording variants, and the logged
    ``label_drift/abs_diff`` shows a target that is not the area target
    (the seed draws CutMix in the two iterations)."""
    config = tmp_path / f'my_{osp.basename(recipe)}'
    config.write_text(f"_base_ = ['mmpretrain::{recipe}']\n"
                      "model = dict(type='TLAlignClassifier')\n")
    result = smoke(str(config), ['--cfg-options', 'randomness.seed=0'],
                   work_dir=str(tmp_path / 'work'))
    check(result, test=False)
    assert any('ImageNet' in c and 'synthetic' in c
               for c in result['changes'])
    [scalars] = glob.glob(str(tmp_path / 'work' / '*' / 'vis_data' /
                              'scalars.json'))
    with open(scalars) as f:
        drift = [r['label_drift/abs_diff'] for r in map(json.loads, f)
                 if 'loss' in r]
    assert len(drift) == 2 and min(drift) >= 0 and max(drift) > 1e-4, drift


def test_a_schedule_the_options_break_fails_first(tmp_path):
    config = tmp_path / 'deit.py'  # mmpretrain's: a 20-epoch warm-up
    config.write_text(f"_base_ = ['{DEIT}']\n")
    with pytest.raises(ValueError, match='after the warm-up'):
        smoke(str(config), ['--cfg-options', 'train_cfg.max_epochs=1'],
              work_dir=str(tmp_path))
    assert not (tmp_path / 'data').exists()  # nothing written yet


@pytest.mark.e2e
def test_a_downstream_smoke_run_loads_its_pretrained_checkpoint(tmp_path):
    """Smoke dropped the config's ``init_cfg=Pretrained``: seeing a TL-Align
    backbone load into UperNet took a hand-shrunk pretraining, an export
    and a hand-written 2-iteration run (issue 41). With ``--checkpoint``
    (or the config's own file, where it exists) it loads as training
    would: strictly, into the small model (the ViT's position embedding
    resized by its own load hook); a file that does not fit is refused
    naming its keys."""
    from tests.downstream.tiny import make_pretrain_checkpoint
    from tlalign_mm.checkpoint import CheckpointMismatchError, load
    config = osp.join(ROOT, 'configs', 'upernet', 'upernet_deit-small-p16-'
                      'ln-mln_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py')
    checkpoint = str(tmp_path / 'deit-small_tlalign.pth')
    make_pretrain_checkpoint(
        osp.join(ROOT, 'configs', 'tlalign', 'deit-small_4xb256-tlalign_'
                 'in1k.py'), checkpoint,
        backbone=dict(arch='deit-small', img_size=224), width=384)
    result = smoke(config, work_dir=str(tmp_path / 'work'),
                   checkpoint=checkpoint)
    check(result, test=False)
    assert any('(--checkpoint), loaded as training would' in c
               for c in result['changes'])

    state = load(checkpoint)['state_dict']
    del state['backbone.patch_embed.projection.weight']
    torch.save(dict(state_dict=state), checkpoint)
    with pytest.raises(CheckpointMismatchError,
                       match='missing in the checkpoint .*patch_embed'):
        smoke(config, work_dir=str(tmp_path / 'work2'),
              checkpoint=checkpoint)
