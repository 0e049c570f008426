"""What :mod:`tlalign_mm.testing.smoke` does before it runs (issue 41): a
downstream config's pretrained checkpoint is loaded where it exists (or as
``--checkpoint`` says), as training would, instead of always dropped; and
a config mistake is refused before the work dir and the data are written.
(The runs themselves: tests/e2e/test_smoke.py.)"""
import os
import tempfile

import pytest

from tlalign_mm.apis import ConfigError
from tlalign_mm.testing import smoke
from tlalign_mm.testing.configs import load

UPERNET = ('configs/upernet/upernet_deit-small-p16-ln-mln_tlalign-in1k-pre_'
           '8xb2-160k_ade20k-512x512.py')
DEIT = 'configs/tlalign/deit-tiny_4xb256-tlalign_in1k.py'


def _pretrained(cfg):
    return cfg.model.backbone.init_cfg


@pytest.fixture
def checkpoints(tmp_path):
    (tmp_path / 'own.pth').touch()
    (tmp_path / 'given.pth').touch()
    return str(tmp_path / 'own.pth'), str(tmp_path / 'given.pth')


def test_the_configs_pretrained_file_is_loaded_where_it_exists(
        tmp_path, checkpoints):
    own, given = checkpoints
    cfg = load(UPERNET)  # its file: work_dirs/..., not here
    changes = smoke.shrink(cfg, str(tmp_path / 'data'))
    assert _pretrained(cfg) is None
    assert any('-> dropped (no such file' in c for c in changes)

    cfg = load(UPERNET)
    _pretrained(cfg).checkpoint = own
    changes = smoke.shrink(cfg, str(tmp_path / 'data'))
    assert _pretrained(cfg).checkpoint == own
    assert _pretrained(cfg).strict is True  # as training loads it
    assert any(f"Pretrained '{own}' kept (the file exists)" in c
               for c in changes)

    cfg = load(UPERNET)
    changes = smoke.shrink(cfg, str(tmp_path / 'data'), checkpoint=given)
    assert _pretrained(cfg).checkpoint == given
    assert any(f"-> '{given}' (--checkpoint)" in c for c in changes)


def test_a_checkpoint_for_a_config_without_pretrained_is_its_load_from(
        tmp_path, checkpoints):
    own, given = checkpoints
    cfg = load(DEIT)
    cfg.load_from = own
    changes = smoke.shrink(cfg, str(tmp_path / 'data'))
    assert cfg.load_from == own and any('kept' in c for c in changes)
    changes = smoke.shrink(cfg, str(tmp_path / 'data'), checkpoint=given)
    assert cfg.load_from == given
    cfg.load_from = str(tmp_path / 'gone.pth')
    smoke.shrink(cfg, str(tmp_path / 'data'))
    assert cfg.load_from is None


@pytest.mark.parametrize('argv, message', [
    (['--cfg-options', 'model.align_cfg.align_layer=last'],
     'Unknown TL-Align options'),
    (['--cfg-options', 'train_cfg.max_epochs=2'], 'after the warm-up')])
def test_a_mistake_is_refused_before_anything_is_written(
        argv, message, tmp_path, monkeypatch):
    """An empty smoke_* folder was left in the temp dir (and, for a
    model refusal, the synthetic data and logs)."""
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    with pytest.raises(ConfigError, match=message):
        smoke.smoke('configs/demo/vit-tiny-p4_1xb64-tlalign_digits.py', argv)
    assert os.listdir(tmp_path) == []
