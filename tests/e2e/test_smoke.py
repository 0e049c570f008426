"""tools/smoke.py: every config in configs/ (found by glob), and a user's
mmpretrain config with the TL-Align line, run two training iterations and
one validation step (a test config: one test step) on tiny synthetic data,
in this process.

mmengine formats a config's text with yapf each time a Runner logs or
dumps it (four times per Runner), and looks up mmpretrain's metafiles
(85 YAML files) for every ``mmpretrain::`` base: here the text is left
unformatted and the look-up cached, which changes no setting of any run."""
import functools
import glob
import math
import os.path as osp

import mmengine.config.config as config_module
import mmengine.config.utils as config_utils
import pytest

from tests.tool_scripts import ROOT, load_tool

SMOKE = load_tool('smoke.py')
CONFIGS = sorted(
    osp.relpath(p, ROOT) for p in glob.glob(
        osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)
    if '_base_' not in osp.relpath(p, ROOT).split(osp.sep))


@pytest.fixture(scope='module')
def quick_runner_setup():
    patch = pytest.MonkeyPatch()
    patch.setattr(config_module, 'FormatCode',
                  lambda text, **kwargs: (text, False))
    patch.setattr(config_utils, '_get_cfg_metainfo', functools.lru_cache()(
        config_utils._get_cfg_metainfo))
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
@pytest.mark.parametrize('config', CONFIGS)
def test_every_config(config, tmp_path, quick_runner_setup):
    result = SMOKE.smoke(osp.join(ROOT, config), work_dir=str(tmp_path))
    check(result, config.startswith(osp.join('configs', 'robustness')))


@pytest.mark.e2e
def test_a_users_mmpretrain_config_with_the_tlalign_line(
        tmp_path, quick_runner_setup):
    config = tmp_path / 'my_deit.py'
    config.write_text(
        "_base_ = ['mmpretrain::deit/deit-tiny_4xb256_in1k.py']\n"
        "model = dict(type='TLAlignClassifier')\n")
    result = SMOKE.smoke(str(config), work_dir=str(tmp_path / 'work'))
    check(result, test=False)
    assert any('ImageNet' in c and 'synthetic' in c
               for c in result['changes'])
