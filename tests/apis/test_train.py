"""tools/train.py's set-up (:mod:`tlalign_mm.apis.train`) checks its inputs
before it builds anything (issue 33): a missing ``--resume`` file, options
without a description, persistent workers where ``--cfg-options`` leaves
none, the collation of the config's library."""
import pytest
from mmengine.config import Config
from torch.utils.data import DataLoader

from tlalign_mm.apis import train
from tlalign_mm.testing.configs import load


def test_a_missing_resume_file_is_named_before_anything_is_built(
        monkeypatch, tmp_path):
    """It was named only once the whole Runner was built (51 s)."""
    gone = str(tmp_path / 'gone.pth')
    monkeypatch.setattr(train, 'install', lambda: pytest.fail('went on'))
    with pytest.raises(FileNotFoundError,
                       match=f'--resume {gone}: no such checkpoint file'):
        train.build_train_runner(train.parse_train_args(
            ['x.py', '--resume', gone]))


def test_every_option_says_what_it_does():
    assert [a.option_strings for a in train.train_parser()._actions
            if not a.help] == []


@pytest.mark.parametrize('options, persistent', [
    ([], True), (['--no-persistent-workers'], False),
    (['--cfg-options', 'train_dataloader.num_workers=0'], False),
    (['--cfg-options', 'train_dataloader.persistent_workers=False'], False),
])
def test_persistent_workers_follow_the_final_settings(options, persistent):
    """``--cfg-options train_dataloader.num_workers=0`` failed the
    DataLoader: persistent workers were switched on before the options
    were merged."""
    cfg = Config(dict(train_dataloader=dict(num_workers=2, batch_size=1)))
    loader = train.merge_train_args(cfg, train.parse_train_args(
        ['x.py', *options])).train_dataloader
    assert loader.persistent_workers is persistent
    DataLoader(range(2), num_workers=loader.num_workers,
               persistent_workers=loader.persistent_workers)


@pytest.mark.parametrize('rel', [
    'tlalign/deit-tiny_4xb256-tlalign_in1k.py',
    'upernet/upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-'
    '512x512.py',
    'cascade_mask_rcnn/cascade-mask-rcnn_swin-tiny-p4-w7_tlalign-in1k-pre_'
    'fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'])
def test_collation_follows_the_configs_scope(rel):
    """mmpretrain's default_collate for mmpretrain configs; mmseg/mmdet
    configs keep the Runner's pseudo_collate (their data preprocessors pad
    images of several sizes)."""
    cfg = load(f'configs/{rel}')
    assert 'collate_fn' not in cfg.train_dataloader
    cfg = train.merge_train_args(cfg, train.parse_train_args(['x.py']))
    for field in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        assert cfg[field].get('collate_fn') == (dict(
            type='default_collate') if cfg.default_scope == 'mmpretrain'
            else None)
