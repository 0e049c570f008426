"""``PooledTIMMBackbone``: mmpretrain's ``TIMMBackbone`` that keeps timm's
own pooling, so a timm ViT classifies from its class token or token mean.

mmpretrain's ``TIMMBackbone`` calls ``reset_classifier(0, '')`` on the timm
model (mmpretrain 1.2.0, ``models/backbones/timm_backbone.py``): a timm
ViT then returns every token, ``(B, N, C)``, which no mmpretrain head
classifies. A neck that picks the class token or averages tokens after the
fact cannot always give timm's feature either: a model built with
``global_pool='avg'`` normalises *after* pooling (``fc_norm``), and with
the pool removed that norm runs on every token. So this builder calls
timm's own ``reset_classifier(0, global_pool)`` once more after
``TIMMBackbone`` is built: the forward is then timm's
``forward_head(forward_features(x), pre_logits=True)``, bit for bit, and
the pooling is stated once, in the timm model, where TL-Align's timm
description (:func:`tlalign_mm.models.families.describe_timm`) reads the
head's readout.
"""
from mmpretrain.registry import MODELS
from torch import nn

POOLS = ('token', 'avg')


@MODELS.register_module(name='PooledTIMMBackbone')
def build_pooled_timm_backbone(model_name: str,
                               global_pool: str = 'token',
                               **kwargs) -> nn.Module:
    """Build mmpretrain's ``TIMMBackbone`` with timm's pooling kept.

    The result is a plain ``TIMMBackbone`` (its class, parameter names and
    state dict), whose forward returns ``(feature, )``, ``feature`` of shape
    ``(B, C)``: what timm's classifier head would read. Configs use it like
    a backbone class:

    .. code-block:: python

        backbone=dict(type='PooledTIMMBackbone',
                      model_name='deit_small_patch16_224',
                      global_pool='token')

    Args:
        model_name (str): a timm model name, e.g.
            ``'deit_small_patch16_224'``.
        global_pool (str): ``'token'`` (the class token, default) or
            ``'avg'`` (the mean of the tokens after the class/register
            tokens, then timm's ``fc_norm``), timm's own option; it is also
            passed to ``timm.create_model``, so the norm sits where timm
            puts it for that pooling. Distilled DeiT takes ``'token'`` and
            averages its class and distillation tokens, as timm's head does.
        **kwargs: ``TIMMBackbone``'s arguments (``pretrained``,
            ``checkpoint_path``, ``in_channels``, ``init_cfg``) and timm
            model arguments (``drop_path_rate``, ``img_size``, ...).

    Returns:
        nn.Module: the ``TIMMBackbone``.
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
    model.reset_classifier(0, global_pool)
    return backbone


# The name configs use; ``PooledTIMMBackbone(...)`` builds like a class.
PooledTIMMBackbone = build_pooled_timm_backbone
