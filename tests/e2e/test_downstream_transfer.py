"""Transfer learning from a TL-Align DeiT-S: the real configs
``configs/transfer/deit-small_tlalign-in1k-pre_8xb96-1000e_{cifar10,
flowers102,stanford-cars}.py`` with the data root, image scale (/7: 224 ->
32), iteration count (one epoch of 2 iterations) and a tiny ViT arch changed
(tests/downstream/tiny.py), trained through ``tools/train.py`` and tested
through ``tools/test.py`` on tiny datasets in their real layouts (CIFAR-10
python pickles, Flowers-102 ``jpg/`` + ``imagelabels.mat`` + ``setid.mat``,
Stanford Cars ``car_ims/`` + ``cars_annos.mat``). The backbone a Runner
builds from each config holds the pretrained tensors. Stanford Cars starts
from the ``tools/export_backbone.py`` export (checked against the config
with ``--check``) instead of the Runner checkpoint.

CIFAR test data cannot have the official md5 sums: its datasets get
``verify_md5=False``, the one override beyond the list above."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config

import tlalign_mm.downstream  # noqa: F401
from tests.downstream import e2e
from tests.downstream.datasets import (
    write_cifar,
    write_flowers102,
    write_stanford_cars,
)
from tests.downstream.tiny import (
    TINY_VIT,
    config_path,
    dump,
    make_pretrain_checkpoint,
    shrink,
)
from tests.tool_scripts import export_cli

PRETRAIN = config_path('tlalign', 'deit-small_4xb256-tlalign_in1k.py')
CASES = {
    # dataset: (writer, batch size giving 2 iterations per epoch)
    # (drop_last=True, as DeiT: 5 CIFAR images in batches of 2)
    'cifar10': (lambda root: write_cifar(root, 'cifar10', per_file=1), 2),
    'flowers102': (write_flowers102, 2),  # train+val: 4 images
    'stanford-cars': (write_stanford_cars, 2),  # train: 4 images
}


def tiny_transfer(cfg: Config, checkpoint: str, batch_size: int) -> Config:
    cfg.model.backbone.arch = dict(TINY_VIT)
    cfg.model.backbone.init_cfg.checkpoint = checkpoint
    cfg.model.head.in_channels = TINY_VIT['embed_dims']
    cfg.train_dataloader.batch_size = batch_size
    cfg.train_cfg.max_epochs = 1
    if cfg.train_dataloader.dataset.type.endswith('CIFAR10'):
        for loader in (cfg.train_dataloader, cfg.val_dataloader,
                       cfg.test_dataloader):
            loader.dataset.verify_md5 = False
    return cfg


@pytest.mark.e2e
@pytest.mark.parametrize('dataset', list(CASES))
def test_transfer_deit_small_from_tlalign_checkpoint(tmp_path, dataset,
                                                     capsys):
    writer, batch_size = CASES[dataset]
    data = writer(str(tmp_path / dataset))
    raw = str(tmp_path / 'pre.pth')
    pretrained = make_pretrain_checkpoint(PRETRAIN, raw, TINY_VIT,
                                          img_size=32)
    n = sum(k.startswith('backbone.') for k in pretrained)
    real = config_path('transfer',
                       f'deit-small_tlalign-in1k-pre_8xb96-1000e_{dataset}.py')
    cfg = Config.fromfile(real)
    assert cfg.model.backbone.init_cfg._scope_ == 'tlalign_mm'
    cfg = tiny_transfer(
        shrink(cfg, data, factor=7, work_dir=str(tmp_path / 'work')), raw,
        batch_size)
    assert cfg.model.backbone.img_size == 32

    checkpoint = raw
    if dataset == 'stanford-cars':  # fine-tune from the export
        checkpoint = str(tmp_path / 'backbone.pth')
        cfg.model.backbone.init_cfg.checkpoint = checkpoint
        config = dump(cfg, str(tmp_path / f'{dataset}_tiny.py'))
        out = export_cli([raw, checkpoint, '--to', 'mmpretrain', '--check',
                          config], capsys)
        assert f'exported {n} tensors' in out
        assert 'loads' in out and 'strictly' in out
        exported = torch.load(checkpoint, weights_only=True)
        assert set(exported['state_dict']) == {
            k for k in pretrained if k.startswith('backbone.')}
    config = dump(cfg, str(tmp_path / f'{dataset}_tiny.py'))

    work = str(tmp_path / 'work')
    out = e2e.train(config, work)
    assert f'Loaded {n} tensors into VisionTransformer from ' \
        f"'{checkpoint}'" in out
    records = e2e.losses(work)
    assert [r['iter'] for r in records] == [1, 2]
    assert all(r['loss'] == r['loss'] for r in records)
    out = e2e.test(config, osp.join(work, 'epoch_1.pth'), work)
    assert 'accuracy/top1' in out

    backbone = e2e.built_backbone(cfg, str(tmp_path / 'inproc'))
    assert type(backbone).__name__ == 'VisionTransformer'
    assert e2e.assert_backbone_equals(backbone, pretrained) == n
