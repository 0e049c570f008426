"""tools/smoke.py: every config in configs/ (found by glob), and a user's
mmpretrain config with the TL-Align line, run two training iterations and
one validation step (a test config: one test step) on tiny synthetic data,
in this process.

All 130 take about 340 CPU seconds, most of it building, initialising and
stepping the base-size models, so by default each recipe runs at its
smallest model size (tiny/small/base in the name) and a downstream config
(transfer, UperNet, Cascade) of one pretraining only: the TL-Align and
CutMix twins differ only in the checkpoint (tests/test_configs.py), which
smoke drops. ``TLALIGN_SMOKE_ALL=1`` runs every config.

mmengine formats a config's text with yapf each time a Runner logs or
dumps it (four times per Runner, about half of a small config's smoke run),
and reads mmpretrain's 85 metafiles for every ``mmpretrain::`` base: here
the text is left unformatted and the metafiles are read once
(``config_snapshot``), which changes no setting of any run."""
import glob
import math
import os
import os.path as osp
import re

import mmengine.config.config as config_module
import pytest

from tests.config_snapshot import _read_package_metafiles_once
from tests.tool_scripts import ROOT, load_tool

SMOKE = load_tool('smoke.py')
CONFIGS = sorted(
    osp.relpath(p, ROOT) for p in glob.glob(
        osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)
    if '_base_' not in osp.relpath(p, ROOT).split(osp.sep))
DEIT = 'mmpretrain::deit/deit-tiny_4xb256_in1k.py'
DOWNSTREAM = ('transfer', 'upernet', 'cascade_mask_rcnn')
SIZES = re.compile(r'(?<![a-z])(tiny|small|base)(?![a-z-]*imagenet)')


def recipe(config: str) -> str:
    """The config without its model size (and, downstream, without the
    pretraining it starts from)."""
    name = SIZES.sub('*', config)
    if config.split(osp.sep)[1] in DOWNSTREAM:
        name = re.sub('cutmix|tlalign', '*', name)
    return name


def stand_in(config: str) -> str:
    """The config that runs for ``config`` by default: its recipe's
    smallest model, CutMix pretraining."""
    size = {'tiny': 0, 'small': 1, 'base': 2}
    return min((c for c in CONFIGS if recipe(c) == recipe(config)),
               key=lambda c: ([size[m] for m in SIZES.findall(c)], c))


def params():
    run_all = os.environ.get('TLALIGN_SMOKE_ALL') == '1'
    for config in CONFIGS:
        other = stand_in(config)
        yield pytest.param(config, id=config, marks=pytest.mark.skipif(
            not run_all and other != config,
            reason=f'{other} runs for it (TLALIGN_SMOKE_ALL=1 runs it)'))


@pytest.fixture(scope='module')
def quick_runner_setup():
    patch = pytest.MonkeyPatch()
    patch.setattr(config_module, 'FormatCode',
                  lambda text, **kwargs: (text, False))
    _read_package_metafiles_once()
    yield
    patch.undo()


def check(result: dict, test: bool) -> None:
    steps = result['steps']
    if test:
        assert steps == dict(train=0, val=0, test=1), steps
    else:
        assert steps == dict(train=2, val=1, test=0), steps
        assert all(math.isfinite(loss) for loss in result['losses'])
    assert result['metrics'], 'the evaluator reported nothing'


@pytest.mark.e2e
@pytest.mark.parametrize('config', list(params()))
def test_every_config(config, tmp_path, quick_runner_setup):
    result = SMOKE.smoke(osp.join(ROOT, config), work_dir=str(tmp_path))
    check(result, config.startswith(osp.join('configs', 'robustness')))


@pytest.mark.e2e
def test_a_users_mmpretrain_config_with_the_tlalign_line(
        tmp_path, quick_runner_setup):
    config = tmp_path / 'my_deit.py'
    config.write_text(f"_base_ = ['{DEIT}']\n"
                      "model = dict(type='TLAlignClassifier')\n")
    result = SMOKE.smoke(str(config), work_dir=str(tmp_path / 'work'))
    check(result, test=False)
    assert any('ImageNet' in c and 'synthetic' in c
               for c in result['changes'])


def test_a_schedule_the_options_break_fails_first(tmp_path):
    config = tmp_path / 'deit.py'  # mmpretrain's: a 20-epoch warm-up
    config.write_text(f"_base_ = ['{DEIT}']\n")
    with pytest.raises(ValueError, match='after the warm-up'):
        SMOKE.smoke(str(config), ['--cfg-options', 'train_cfg.max_epochs=1'],
                    work_dir=str(tmp_path))
    assert not (tmp_path / 'data').exists()  # nothing written yet
