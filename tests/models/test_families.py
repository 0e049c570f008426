"""How a backbone finds its family (tlalign_mm.models.families): families
registered by decorator in an mmengine registry, looked up by the
backbone's class first, then by the modules it holds (timm models too);
and the boundary, one message naming the cause and the fix for a backbone
with no token attention, one a family refuses, and one whose attention no
family describes. (Exactness of each family: test_alignment.py; the
classifier built from mmpretrain's own configs: test_tlalign_classifier.py.)
"""
import pytest
import timm
import torch.nn as nn
from mmengine.registry import Registry
from mmpretrain.registry import MODELS

from tlalign_mm.models import Description, describe
from tlalign_mm.registry import FAMILIES, TOKEN_RULES

from . import zoo


def test_families_and_token_rules_are_mmengine_registries():
    assert isinstance(FAMILIES, Registry) and isinstance(TOKEN_RULES, Registry)
    assert FAMILIES.scope == TOKEN_RULES.scope == 'tlalign_mm'
    for path in ('mmpretrain.models.utils.attention.MultiheadAttention',
                 'timm.models.vision_transformer.VisionTransformer'):
        assert path in FAMILIES.module_dict
    assert 'mmcv.cnn.bricks.transformer.PatchEmbed' in TOKEN_RULES.module_dict


@pytest.fixture
def registered():
    """Register functions under keys, by the decorator a downstream package
    uses, for this test only."""
    keys = []

    def register(key, function):
        FAMILIES.register_module(key)(function)
        keys.append(key)
        return function

    yield register
    for key in keys:
        FAMILIES.module_dict.pop(key)


def test_a_family_registered_for_the_backbone_class_comes_first(registered):
    """TinyViTLike holds mmpretrain MultiheadAttention (the ViT family's),
    but a family registered for its own class describes it; it states its
    own token size, which is what the classifier gives TLTokenCutMix."""
    backbone = zoo.build(dict(type='TinyViTLike'))
    assert describe(backbone).token_size == (8, 8)  # the ViT family's

    def describe_tiny(model):
        return describe_vit(model)._replace(token_size=(16, 16))

    from tlalign_mm.models.families import describe_vit
    registered(f'{zoo.__name__}.TinyViTLike', describe_tiny)
    assert describe(backbone).token_size == (16, 16)
    model = MODELS.build(dict(
        type='TLAlignClassifier', backbone=dict(type='TinyViTLike'),
        head=dict(type='VisionTransformerClsHead', num_classes=3,
                  in_channels=32),
        data_preprocessor=dict(num_classes=3),
        train_cfg=dict(augments=[dict(type='TLTokenCutMix', alpha=1.0)])))
    assert model.data_preprocessor.batch_augments.augments[0].patch_size == 16


def test_a_timm_model_goes_through_the_same_lookup(registered):
    """timm's Eva (its EvaAttention undescribed) is refused like any other
    backbone, and a family registered for its class describes it, bare or
    in mmpretrain's TIMMBackbone."""
    kwargs = dict(img_size=28, depth=1, pretrained=False)
    bare = timm.create_model('eva02_tiny_patch14_224', **kwargs)
    wrapped = MODELS.build(dict(type='TIMMBackbone',
                                model_name='eva02_tiny_patch14_224',
                                **kwargs))
    for model in (bare, wrapped):
        with pytest.raises(NotImplementedError,
                           match='none describes its attention'):
            describe(model)

    def describe_eva(backbone):
        eva = getattr(backbone, 'timm_model', backbone)
        return Description(list(eva.blocks), [], eva.patch_embed,
                           token_size=(14, 14))

    registered('timm.models.eva.Eva', describe_eva)
    for model in (bare, wrapped):
        assert describe(model).token_size == (14, 14)


def test_modules_of_two_families_are_a_clear_error():
    """A backbone holding the attention of two families, none registered
    for it, is not guessed at."""
    class Hybrid(nn.Module):
        def __init__(self):
            super().__init__()
            self.vit = zoo.build(zoo.VIT)
            self.swin = zoo.build(zoo.SWIN)

    with pytest.raises(NotImplementedError,
                       match='several TL-Align families .*register a family '
                       f'for {__name__}.*Hybrid itself'):
        describe(Hybrid())


class MyAttention(nn.Module):
    """An attention module no family describes."""

    def forward(self, x):
        return x


class ToyNet(nn.Module):

    def __init__(self):
        super().__init__()
        self.attn = MyAttention()


# name: (backbone config or module, the one message)
NO_TOKEN_ATTENTION = 'TL-Align aligns labels through attention; {} has none'
BOUNDARY = {
    'ResNet': (dict(type='ResNet', depth=18), NO_TOKEN_ATTENTION),
    'ConvNeXt': (dict(type='ConvNeXt', arch='atto'), NO_TOKEN_ATTENTION),
    'MobileNetV2': (dict(type='MobileNetV2'), NO_TOKEN_ATTENTION),
    'PoolFormer': (dict(type='PoolFormer', arch='s12'), NO_TOKEN_ATTENTION),
    'MlpMixer': (dict(type='MlpMixer', arch=dict(
        embed_dims=16, num_layers=1, tokens_mlp_dims=8,
        channels_mlp_dims=8), img_size=32, patch_size=8),
        NO_TOKEN_ATTENTION),
    # attention by name, none between tokens: the reason in the message
    'EdgeNeXt': (dict(type='EdgeNeXt', arch='xxsmall'),
                 NO_TOKEN_ATTENTION + r' \(its SDTA attention mixes channels'),
    'ResNeSt': (dict(type='ResNeSt', depth=50),
                NO_TOKEN_ATTENTION + r' \(its split attention'),
    # token attention, refused with the reason
    'RevVisionTransformer': (dict(type='RevVisionTransformer', arch=dict(
        embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64),
        img_size=32, patch_size=8),
        'TL-Align does not support {}: its reversible blocks'),
    # token attention no family describes: which, and the fix
    'ToyNet': (ToyNet(), 'TL-Align has no family for {}: none '
                      rf'describes its attention \({__name__}.MyAttention\). '
                      r'Add a family \(docs/design.md'),
    # the attention of a family, not built as it reads it: no crash
    # two streams: refused with the reason (its own config: the classifier)
    'Conformer': (dict(type='Conformer', arch='tiny'), 'TL-Align does not '
                  'support {}: its CNN and transformer streams exchange '
                  'features in every block .*Train it with ImageClassifier'),
    'MobileViT': (dict(type='MobileViT', arch='xx_small'), '{} holds the '
                  'attention of the ViT family but is not built as that '
                  'family reads it .*no family describes {}. Add a family'),
}


@pytest.mark.parametrize('name', list(BOUNDARY))
def test_what_tlalign_does_not_describe_is_one_clear_message(name):
    backbone, message = BOUNDARY[name]
    if isinstance(backbone, dict):
        backbone = MODELS.build(backbone)
    with pytest.raises(NotImplementedError, match=message.format(name,
                                                                 name)):
        describe(backbone)
