"""What every analysis sets up: the config, its model (loaded strictly, or
seeded), its test (or val) dataloader, and the output files. The command
line every tool shares is :mod:`tlalign_mm.analysis.cli`."""
import csv
from typing import Iterable, Optional

import mmengine
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

from tlalign_mm.checkpoint import load, load_strictly, state_dict_of

NO_CHECKPOINT = ('', 'none', 'None', 'random')


def load_config(path: str, cfg_options: Optional[dict] = None) -> Config:
    cfg = Config.fromfile(path)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    # The current logger: warnings only (no weight-init report).
    MMLogger.get_instance(f'tlalign_analysis_{id(cfg)}',
                          log_level='WARNING')
    return cfg


def build_model(cfg: Config, checkpoint: Optional[str] = None,
                device='cpu', seed: int = 0) -> nn.Module:
    """The config's model in eval mode from ``checkpoint``, strictly (a
    partly loaded model's analysis means nothing), or seeded without one."""
    from mmpretrain.registry import MODELS
    model_cfg = cfg.model.copy()
    # As mmengine's Runner: a top-level data_preprocessor is the model's.
    if cfg.get('data_preprocessor') is not None:
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    random_init = checkpoint in NO_CHECKPOINT or checkpoint is None
    # Seeded from the build on: modules that init_weights leaves alone
    # (a Conv2d patch embedding, say) keep the weights they drew when built.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = MODELS.build(model_cfg)
        if random_init:
            model.init_weights()
    if not random_init:  # tlalign_mm's loader, whether install() ran or not
        load_strictly(model, state_dict_of(load(checkpoint), checkpoint),
                      repr(checkpoint))
    return model.to(device).eval()


def dataloader_cfg(cfg: Config, split: str = 'test') -> dict:
    """A copy of the config's ``{split}_dataloader`` (else the other of
    test/val)."""
    key = f'{split}_dataloader'
    other = 'val_dataloader' if split == 'test' else 'test_dataloader'
    loader = cfg.get(key) or cfg.get(other)
    if not loader:
        raise ValueError(f'The config has neither {key} nor {other}.')
    return loader.copy()


def build_dataloader(cfg: Config, split: str = 'test',
                     batch_size: Optional[int] = None):
    """The config's ``{split}_dataloader`` (falling back to the other of
    test/val), never shuffled: the same images in every run."""
    loader = dataloader_cfg(cfg, split)
    if batch_size:
        loader['batch_size'] = batch_size
    sampler = dict(loader.get('sampler') or dict(type='DefaultSampler'))
    if 'shuffle' in sampler or sampler.get('type') == 'DefaultSampler':
        sampler['shuffle'] = False
    loader['sampler'] = sampler
    loader = Runner.build_dataloader(loader)
    if len(loader.dataset) == 0:
        raise ValueError(
            f'The {split} dataset of the config has no images '
            f'({type(loader.dataset).__name__}, data_root '
            f'{getattr(loader.dataset, "data_root", None)!r}): an analysis '
            'of no images would report meaningless zeros. Check the data '
            'root and the split.')
    return loader


def write_csv(path: str, rows: Iterable[dict]) -> str:
    rows = list(rows)
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_json(path: str, data) -> str:
    """``mmengine.dump`` as JSON (numpy values too); returns ``path``."""
    mmengine.dump(data, path, file_format='json', indent=2)
    return path
