"""``TLAlignBackbone``, removed: the alignment options have one home,
``TLAlignClassifier(align_cfg=...)`` (an alias would keep a second alive);
a config that names it gets an error saying where its options go."""
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
    """The backbone config inside a ``TLAlignBackbone`` one (an older
    checkpoint's ``meta.cfg``); any other config as it is."""
    while cfg.get('type') == 'TLAlignBackbone':
        inner = dict(cfg['backbone'])
        if cfg.get('init_cfg') is not None:
            inner['init_cfg'] = cfg['init_cfg']
        cfg = inner
    return cfg
