"""tools/train.py's set-up (:mod:`tlalign_mm.apis.train`) checks its inputs
before it builds anything (issues 33 and 41): a missing ``--resume`` file,
what the model refuses to build, the schedule, mixed precision without a
GPU, a missing dataset, persistent workers where ``--cfg-options`` leaves
none, the collation of the config's library, ``--resume`` without a
checkpoint."""
import pytest
from mmengine.config import Config
from torch.utils.data import DataLoader

from tlalign_mm.apis import ConfigError, train
from tlalign_mm.testing.configs import ROOT, load


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


DEMO = 'configs/demo/vit-tiny-p4_1xb64-tlalign_digits.py'
RESNET = f'''_base_ = ['{{root}}/{DEMO}']
model = dict(
    backbone=dict(_delete_=True, type='ResNet', depth=18),
    neck=dict(_delete_=True, type='GlobalAveragePooling'),
    head=dict(_delete_=True, type='LinearClsHead', num_classes=10,
              in_channels=512))
'''


@pytest.fixture
def nothing_built(monkeypatch):
    """The Runner is never built (nor its work dir, logs, datasets)."""
    monkeypatch.setattr(train, 'build_runner',
                        lambda cfg: pytest.fail('the Runner was built'))


@pytest.mark.parametrize('argv, message', [
    (['--cfg-options', 'model.align_cfg.align_layer=last'],
     r"^model: Unknown TL-Align options \['align_layer'\]; known: "),
    (['--cfg-options', 'model.align_cfg.residual_norm=no'],
     "^model: TL-Align option residual_norm must be True or False, got 'no'"),
    (['--cfg-options', 'model.target=tl-align'],
     "^model: TLAlignClassifier target must be one of .*got 'tl-align'"),
    (['--cfg-options', 'model.train_cfg.augments.0.type=CutMixx'],
     '^model: CutMixx is not in the .*registry'),
    (['--cfg-options', 'model.backbone.arch=tiny-ish'],
     '^model: Arch tiny-ish is not in default archs'),
    (['--cfg-options', 'train_cfg.max_epochs=2'],
     r'^param_scheduler.1 \(CosineAnnealingLR\) begins at epoch 3, after the '
     'warm-up'),
    (['--cfg-options', 'last_checkpoint_hook.interval=0'],
     r'^custom_hooks\[2\] \(LastCheckpointHook\): interval must be a '
     'positive int'),
    (['--cfg-options', 'strict_load=maybe'],
     "^strict_load must be True or False, got 'maybe'"),
    (['--auto-scale-lr'], '^`--auto-scale-lr` needs `auto_scale_lr'),
    (['RESNET'], '^model: TL-Align .*ResNet'),  # issue 43 rewords it
    (['RESNET', 'no _delete_'], 'resnet.py: neck=.* You may set '
     '`_delete_=True`'),  # mmengine's merge of the config file
])
def test_a_config_mistake_is_refused_before_anything_is_built(
        argv, message, nothing_built, tmp_path):
    """Each came as a traceback after 226-440 lines of log (environment,
    config) and left a work dir behind (issue 41); now a ConfigError (one
    ``error:`` line in the tools) and no work dir."""
    config = DEMO
    if argv[:1] == ['RESNET']:
        text = RESNET.format(root=ROOT)
        if argv[1:]:
            text = text.replace('neck=dict(_delete_=True, ', 'neck=dict(')
        config, argv = str(tmp_path / 'resnet.py'), []
        (tmp_path / 'resnet.py').write_text(text)
    work_dir = tmp_path / 'work'
    with pytest.raises(ConfigError, match=message):
        train.build_train_runner(train.parse_train_args(
            [config, '--work-dir', str(work_dir), *argv]))
    assert not work_dir.exists()


def test_amp_without_a_gpu_is_refused_before_anything_is_built(
        monkeypatch, nothing_built, tmp_path):
    """mmengine's AssertionError came after 358 lines, with a work dir."""
    import mmengine.device
    for name in ('cuda', 'npu', 'mlu', 'musa'):
        monkeypatch.setattr(mmengine.device, f'is_{name}_available',
                            lambda: False)
    args = train.parse_train_args([DEMO, '--amp', '--work-dir',
                                   str(tmp_path / 'work')])
    with pytest.raises(ConfigError, match='needs a GPU .* tools/smoke.py'):
        train.build_train_runner(args)
    monkeypatch.setattr(mmengine.device, 'is_cuda_available', lambda: True)
    train.check_amp(train.merge_train_args(load(DEMO), args))  # passes


def test_a_missing_imagenet_names_its_layout_before_anything_is_built(
        nothing_built, tmp_path):
    """It was 'No such file or directory: data/imagenet/train' after 434
    lines of log, with a work dir left behind."""
    root = tmp_path / 'imagenet'
    with pytest.raises(FileNotFoundError, match=(
            f"(?s)ImageNet \\(data_root='{root}'\\) is missing: {root}/train. "
            'Expected layout .*train/n01440764/.*ILSVRC2012')):
        train.build_train_runner(train.parse_train_args([
            'configs/tlalign/deit-tiny_4xb256-tlalign_in1k.py', '--work-dir',
            str(tmp_path / 'work'), '--cfg-options',
            f'train_dataloader.dataset.data_root={root}',
            f'val_dataloader.dataset.data_root={root}']))
    assert not (tmp_path / 'work').exists()


def test_resume_in_a_work_dir_without_checkpoints_says_it_starts_afresh(
        tmp_path):
    """It logged 'starting afresh', then mmengine's 'Auto resumed from the
    latest checkpoint None'; now the run is a fresh one (resume off), and
    a found checkpoint is named as the one loaded."""
    for work_dir in (tmp_path / 'new', tmp_path):  # missing, empty
        cfg = Config(dict(resume=True, load_from=None,
                          work_dir=str(work_dir)))
        train.resolve_resume(cfg)
        assert (cfg.resume, cfg.load_from) == (False, None)
    import torch
    torch.save(dict(meta=dict(epoch=1, iter=3), state_dict={
        'w': torch.zeros(1)}, message_hub={}), tmp_path / 'epoch_1.pth')
    cfg = Config(dict(resume=True, load_from=None, work_dir=str(tmp_path)))
    train.resolve_resume(cfg)
    assert (cfg.resume, cfg.load_from) == (True, str(tmp_path /
                                                      'epoch_1.pth'))


def test_the_check_leaves_the_config_as_it_was():
    """A build may change its config (mmpretrain's RandomBatchAugment
    appends the no-mix share to ``probs``): the Runner would build the
    model again from [0.25, 0.25, 0.5] and refuse it."""
    cfg = load('configs/sl_vit/sl-swin_1xb128-cutmix_tiny-imagenet.py')
    before = cfg.to_dict()
    train.check_model(cfg)
    train.check_hooks(cfg)
    assert cfg.to_dict() == before
