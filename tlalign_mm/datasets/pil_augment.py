"""AutoAugment's Rotate, Color and Contrast as PIL computes them.

The SPT/LSA code (aanna0701/SPT_LSA_ViT 54bd796) runs DeepVoltaire's
AutoAugment on PIL images (``utils/transforms.py:48-73``); mmpretrain's ops
of the same names compute other images. ``Rotate`` hands ``pad_val=128`` to
``cv2.warpAffine`` as a scalar, which fills (128, 0, 0), not the original's
grey (``transforms.py:52-53``), and cv2's nearest neighbour picks another
pixel within its 1/1024-pixel fixed-point step of a pixel edge.
``ColorTransform`` and ``Contrast`` take the grey with BGR weights (mmcv's
``bgr2gray``: red and blue swap on mmpretrain's RGB CIFAR arrays), and cv2
rounds the blend where PIL's ``Image.blend`` truncates.

These subclasses keep their parent's arguments and random draws (the same
NumPy calls in order) and compute the image with PIL, told the array's
``channel_order`` (``'bgr'`` from ``LoadImageFromFile``, ``'rgb'`` for
mmpretrain's CIFAR; in an ``HParamsAutoAugment`` or a ``RandAugment``,
``hparams=dict(channel_order=...)``: mmpretrain 1.2.0's ``AutoAugment``
drops its ``hparams``, see :mod:`.auto_augment`).
"""
from typing import Callable, Optional, Sequence, Union

import numpy as np
from mmpretrain.datasets.transforms import ColorTransform, Contrast, Rotate
from mmpretrain.registry import TRANSFORMS
from PIL import Image, ImageEnhance

__all__ = ['PILColorTransform', 'PILContrast', 'PILRotate']

CHANNEL_ORDERS = ('bgr', 'rgb')
_RESAMPLE = dict(nearest=Image.NEAREST, bilinear=Image.BILINEAR,
                 bicubic=Image.BICUBIC)


class _ThroughPIL:
    """The parent's draws (disable, magnitude, sign); the image by PIL."""

    def _set_channel_order(self, channel_order: str) -> None:
        if channel_order not in CHANNEL_ORDERS:
            raise ValueError(
                f'{type(self).__name__}: channel_order must be "bgr" (the '
                'arrays of LoadImageFromFile) or "rgb" (mmpretrain\'s CIFAR), '
                f'got {channel_order!r}.')
        self.channel_order = channel_order

    def _through_pil(self, results: dict, fixed: Optional[float],
                     apply: Callable[[Image.Image, float], Image.Image]):
        if self.random_disable():
            return results
        value = self.random_negative(
            self.random_magnitude() if fixed is None else fixed)
        img = results['img']
        if not (isinstance(img, np.ndarray) and img.dtype == np.uint8
                and img.ndim == 3 and img.shape[2] == 3):
            raise TypeError(
                f'{type(self).__name__}: needs a uint8 (H, W, 3) image, got '
                f'{getattr(img, "dtype", type(img))} of shape '
                f'{getattr(img, "shape", None)}.')
        bgr = self.channel_order == 'bgr'
        out = np.asarray(apply(Image.fromarray(img[..., ::-1] if bgr else img),
                               value))
        results['img'] = np.ascontiguousarray(out[..., ::-1] if bgr else out)
        return results

    def __repr__(self):
        return (super().__repr__()[:-1] +
                f', channel_order={self.channel_order!r})')


@TRANSFORMS.register_module()
class PILRotate(_ThroughPIL, Rotate):
    """mmpretrain's ``Rotate`` (``angle`` positive clockwise) as the
    original's (``utils/transforms.py:48-53``): ``Image.rotate(-angle,
    fillcolor=pad_val)`` about the centre, unscaled (``center``, ``scale``:
    the defaults only). ``interpolation``: PIL's ``'nearest'`` (default),
    ``'bilinear'`` or ``'bicubic'``; a 3-value ``pad_val`` is in the
    array's ``channel_order``; the rest as ``Rotate``."""

    def __init__(self, angle: Optional[float] = None,
                 center: Optional[tuple] = None, scale: float = 1.0,
                 pad_val: Union[int, Sequence[int]] = 128, prob: float = 0.5,
                 random_negative_prob: float = 0.5,
                 interpolation: str = 'nearest', channel_order: str = 'bgr',
                 **kwargs):
        if center is not None or scale != 1.0:
            raise ValueError(
                'PILRotate rotates about the image centre without scaling '
                f'(PIL Image.rotate); got center={center}, scale={scale}. '
                'Use mmpretrain\'s Rotate for these.')
        if interpolation not in _RESAMPLE:
            raise ValueError(
                f'PILRotate: interpolation must be one of {list(_RESAMPLE)} '
                f'(PIL\'s), got {interpolation!r}.')
        super().__init__(angle=angle, pad_val=pad_val, prob=prob,
                         random_negative_prob=random_negative_prob,
                         interpolation=interpolation, **kwargs)
        self._set_channel_order(channel_order)
        fill = (self.pad_val, ) * 3 if np.isscalar(self.pad_val) \
            else tuple(self.pad_val)
        if len(fill) != 3:
            raise ValueError(
                f'PILRotate: pad_val needs 1 or 3 values, got {pad_val}.')
        self._fill = fill[::-1] if channel_order == 'bgr' else fill

    def transform(self, results: dict) -> dict:
        return self._through_pil(
            results, self.angle, lambda im, angle: im.rotate(
                -angle, _RESAMPLE[self.interpolation], fillcolor=self._fill))


class _PILEnhance(_ThroughPIL):
    """An ``ImageEnhance`` op at ``1 + magnitude`` (Color, Contrast)."""
    _enhancer: type

    def __init__(self, magnitude: Optional[float] = None, prob: float = 0.5,
                 random_negative_prob: float = 0.5, channel_order: str = 'bgr',
                 **kwargs):
        super().__init__(magnitude=magnitude, prob=prob,
                         random_negative_prob=random_negative_prob, **kwargs)
        self._set_channel_order(channel_order)

    def transform(self, results: dict) -> dict:
        return self._through_pil(
            results, self.magnitude,
            lambda im, m: self._enhancer(im).enhance(1 + m))


@TRANSFORMS.register_module()
class PILColorTransform(_PILEnhance, ColorTransform):
    """mmpretrain's ``ColorTransform`` as the original's ``Color``
    (``utils/transforms.py:56-58``): ``ImageEnhance.Color(img).enhance(1 +
    magnitude)``, PIL's grey (ITU-R 601-2 luma of R, G, B) whatever the
    ``channel_order``."""
    _enhancer = ImageEnhance.Color


@TRANSFORMS.register_module()
class PILContrast(_PILEnhance, Contrast):
    """mmpretrain's ``Contrast`` as the original's
    (``utils/transforms.py:71-73``): ``ImageEnhance.Contrast(img).enhance(1
    + magnitude)``, blended with the mean of PIL's grey."""
    _enhancer = ImageEnhance.Contrast
