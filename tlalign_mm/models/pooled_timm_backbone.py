"""``PooledTIMMBackbone``: mmpretrain's ``TIMMBackbone`` that keeps timm's
own pooling, so a timm ViT classifies from its class token or token mean.

mmpretrain's ``TIMMBackbone`` calls ``reset_classifier(0, '')`` on the timm
model (mmpretrain 1.2.0, ``models/backbones/timm_backbone.py``): a ViT then
returns every token, which no mmpretrain head classifies, and a neck that
pools after the fact cannot always give timm's feature (with
``global_pool='avg'`` timm normalises *after* pooling, ``fc_norm``). So this
builder calls ``reset_classifier(0, global_pool)`` once more: the forward is
timm's ``forward_head(forward_features(x), pre_logits=True)``, bit for bit,
and the pooling is stated once, in the timm model, where TL-Align's timm
description reads the head's readout.
"""
from mmpretrain.registry import MODELS
from torch import nn

POOLS = ('token', 'avg')


@MODELS.register_module(name='PooledTIMMBackbone')
def build_pooled_timm_backbone(model_name: str,
                               global_pool: str = 'token',
                               checkpoint_path: str = '',
                               **kwargs) -> nn.Module:
    """mmpretrain's ``TIMMBackbone`` (its class, parameter names and state
    dict) with timm's pooling kept: its forward returns ``(feature, )``,
    ``(B, C)``, what timm's classifier head would read.

    Args:
        model_name (str): a timm model name, e.g.
            ``'deit_small_patch16_224'``.
        global_pool (str): ``'token'`` (the class token, default) or
            ``'avg'`` (the mean of the tokens after the prefix tokens, then
            ``fc_norm``), timm's option, also passed to
            ``timm.create_model``. Distilled DeiT takes ``'token'`` and
            averages its class and distillation tokens, as timm's head does.
        checkpoint_path (str): a state dict of the timm model (its
            classifier ignored), loaded strictly by
            :func:`tlalign_mm.checkpoint.load`, not by timm's own
            ``torch.load`` (no size check before it inflates a file).
        **kwargs: ``TIMMBackbone``'s arguments (``pretrained``,
            ``in_channels``, ``init_cfg``) and timm's (``drop_path_rate``,
            ``img_size``, ...).
    """
    if global_pool not in POOLS:
        raise ValueError(
            f"PooledTIMMBackbone global_pool must be one of {POOLS} (the "
            f'class token or the token mean), got {global_pool!r}.')
    if kwargs.get('features_only'):
        raise ValueError(
            'PooledTIMMBackbone returns the pooled feature; for feature '
            "pyramids use type='TIMMBackbone', features_only=True.")
    try:
        backbone = MODELS.build(
            dict(type='TIMMBackbone', model_name=model_name,
                 global_pool=global_pool, **kwargs))
    except AssertionError as error:  # timm validates with assert
        raise ValueError(
            f'timm refused {model_name!r} with global_pool='
            f'{global_pool!r}: {error}') from error
    model = backbone.timm_model
    if not hasattr(model, 'reset_classifier'):
        raise ValueError(
            f'timm {type(model).__name__} has no reset_classifier, so it '
            'cannot keep a pooled head input; use TIMMBackbone.')
    if checkpoint_path:  # as timm's create_model, minus the classifier
        from tlalign_mm.checkpoint import load, load_strictly, state_dict_of
        heads = model.pretrained_cfg.get('classifier') or ()
        load_strictly(model, state_dict_of(load(checkpoint_path),
                                           checkpoint_path),
                      repr(checkpoint_path), allow_unexpected=[
                          f'{h}.*' for h in ((heads, ) if isinstance(
                              heads, str) else heads)])
    model.reset_classifier(0, global_pool)
    return backbone


# The name configs use; ``PooledTIMMBackbone(...)`` builds like a class.
PooledTIMMBackbone = build_pooled_timm_backbone
