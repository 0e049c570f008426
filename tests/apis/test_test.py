"""tools/test.py's set-up (:mod:`tlalign_mm.apis.test`) refuses before it
builds anything (issue 41): a checkpoint file that does not exist (found
only when the Runner, its work dir and the dataset were built, 278 lines
into the log), mmdet's --out that is not a pickle, a model the config
cannot build."""
import pytest

from tlalign_mm.apis import ConfigError, test

DEMO = 'configs/demo/vit-tiny-p4_1xb64-tlalign_digits.py'
CASCADE = ('configs/cascade_mask_rcnn/cascade-mask-rcnn_swin-tiny-p4-w7_'
           'tlalign-in1k-pre_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py')


def test_a_missing_checkpoint_is_named_before_anything(monkeypatch, tmp_path):
    monkeypatch.setattr(test, 'install', lambda: pytest.fail('went on'))
    gone = str(tmp_path / 'gone.pth')
    with pytest.raises(FileNotFoundError,
                       match=f'^{gone}: no such checkpoint file$'):
        test.build_test_runner(test.parse_test_args([DEMO, gone]))


@pytest.mark.parametrize('config, argv, message', [
    (CASCADE, ['--out', 'r.json'], r'must be a \.pkl or \.pickle file'),
    (DEMO, ['--cfg-options', 'model.align_cfg.align_layer=last'],
     'model: Unknown TL-Align options'),
    # a config with no test split (it was a KeyError/TypeError traceback)
    (DEMO, ['--cfg-options', 'test_evaluator=None'],
     '^test_evaluator: not set in the config')])
def test_a_config_mistake_is_refused_before_anything_is_built(
        config, argv, message, monkeypatch, tmp_path):
    monkeypatch.setattr(test, 'build_runner',
                        lambda cfg: pytest.fail('the Runner was built'))
    (tmp_path / 'x.pth').touch()
    with pytest.raises(ConfigError, match=message):
        test.build_test_runner(test.parse_test_args(
            [config, str(tmp_path / 'x.pth'), '--work-dir',
             str(tmp_path / 'work'), *argv]))
    assert not (tmp_path / 'work').exists()
