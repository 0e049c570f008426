"""Global average pooling for backbones that return a list of maps."""
from mmpretrain.models.necks import GlobalAveragePooling
from mmpretrain.registry import MODELS


@MODELS.register_module()
class PyramidGlobalAveragePooling(GlobalAveragePooling):
    """mmpretrain's ``GlobalAveragePooling`` that also takes the *list* of
    feature maps mmdet backbones (e.g. ``PyramidVisionTransformer``) return,
    so they classify in mmpretrain unchanged and their weights load back into
    mmdet. Same arguments as :class:`GlobalAveragePooling`."""

    def forward(self, inputs):
        if isinstance(inputs, list):
            inputs = tuple(inputs)
        return super().forward(inputs)
