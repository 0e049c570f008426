"""``TLAlignBackbone``, removed: the alignment options live in one place,
``TLAlignClassifier(align_cfg=...)``. A config that still names it gets a
build-time error that says where its options go (rather than an alias:
two homes for the options was the problem, and an alias would keep the
second one alive)."""
from mmpretrain.registry import MODELS


@MODELS.register_module(name='TLAlignBackbone')
def removed_tlalign_backbone(backbone=None, **options):
    """Raise: say how to write the config without ``TLAlignBackbone``."""
    raise ValueError(
        'TLAlignBackbone is gone: give the backbone config itself as the '
        f'classifier\'s backbone ({backbone!r}) and move its options '
        f'{sorted(options)} to TLAlignClassifier(align_cfg=dict(...)) '
        '(align_layers, residual_norm, follow_drop_path; an init_cfg goes '
        'in the backbone config).')


def plain_backbone_cfg(cfg: dict) -> dict:
    """The backbone config inside a ``TLAlignBackbone`` one (as an older
    checkpoint's ``meta.cfg`` may hold), without the alignment options; any
    other config as it is."""
    while cfg.get('type') == 'TLAlignBackbone':
        inner = dict(cfg['backbone'])
        if cfg.get('init_cfg') is not None:
            inner['init_cfg'] = cfg['init_cfg']
        cfg = inner
    return cfg
