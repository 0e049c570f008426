"""AutoAugment's Rotate, Color and Contrast as PIL computes them.

The SPT/LSA code (aanna0701/SPT_LSA_ViT 54bd796) runs DeepVoltaire's
AutoAugment on PIL images (``utils/transforms.py:48-73``). mmpretrain's ops
of the same names compute other images:

- ``Rotate`` hands ``pad_val=128`` to ``cv2.warpAffine`` as a scalar, which
  fills the first channel only, (128, 0, 0); the original fills grey
  (``transforms.py:52-53``). cv2's nearest neighbour also picks another
  source pixel than PIL's where the source point lies within cv2's
  fixed-point step (1/1024 pixel) of a pixel edge.
- ``ColorTransform`` and ``Contrast`` take the grey image with BGR weights
  (mmcv's ``bgr2gray``), so on RGB arrays (mmpretrain's CIFAR) red and blue
  swap places in the grey; and cv2 rounds the blend where PIL's
  ``Image.blend`` truncates.

These subclasses keep their parent's arguments and random draws (the same
NumPy calls in the same order) and compute the image with PIL, told the
array's channel order: ``'bgr'`` for images from ``LoadImageFromFile``,
``'rgb'`` for mmpretrain's CIFAR arrays. In an ``AutoAugment``, pass it
with ``hparams=dict(pad_val=128, channel_order=...)``.
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
                f'{type(self).__name__}: channel_order must be one of '
                f'{CHANNEL_ORDERS} (the order of the image array: "bgr" '
                'from LoadImageFromFile, "rgb" for mmpretrain\'s CIFAR), '
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
    """mmpretrain's ``Rotate`` (``angle`` positive clockwise) computed as
    ``Image.rotate(-angle, fillcolor=pad_val)``: about the image centre,
    the corners filled with ``pad_val``, as the original's
    ``Rotate`` (``utils/transforms.py:48-53``, nearest neighbour).

    Args:
        angle, pad_val, prob, random_negative_prob, **kwargs: as ``Rotate``;
            a 3-value ``pad_val`` is in the array's channel order.
        interpolation (str): ``'nearest'``, ``'bilinear'`` or ``'bicubic'``
            (PIL's). Defaults to ``'nearest'``.
        channel_order (str): ``'bgr'`` or ``'rgb'``. Defaults to ``'bgr'``.
        center, scale: PIL rotates about the centre without scaling; only
            the defaults (None, 1.0) are accepted.
    """

    def __init__(self,
                 angle: Optional[float] = None,
                 center: Optional[tuple] = None,
                 scale: float = 1.0,
                 pad_val: Union[int, Sequence[int]] = 128,
                 prob: float = 0.5,
                 random_negative_prob: float = 0.5,
                 interpolation: str = 'nearest',
                 channel_order: str = 'bgr',
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

    def __init__(self,
                 magnitude: Optional[float] = None,
                 prob: float = 0.5,
                 random_negative_prob: float = 0.5,
                 channel_order: str = 'bgr',
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
    """mmpretrain's ``ColorTransform`` computed as
    ``ImageEnhance.Color(img).enhance(1 + magnitude)``, the original's
    ``Color`` (``utils/transforms.py:56-58``): PIL's grey (ITU-R 601-2 luma
    of R, G, B) whatever the array's channel order.

    Args:
        magnitude, prob, random_negative_prob, **kwargs: as
            ``ColorTransform``.
        channel_order (str): ``'bgr'`` or ``'rgb'``. Defaults to ``'bgr'``.
    """
    _enhancer = ImageEnhance.Color


@TRANSFORMS.register_module()
class PILContrast(_PILEnhance, Contrast):
    """mmpretrain's ``Contrast`` computed as
    ``ImageEnhance.Contrast(img).enhance(1 + magnitude)``, the original's
    ``Contrast`` (``utils/transforms.py:71-73``): blended with the mean of
    PIL's grey image.

    Args:
        magnitude, prob, random_negative_prob, **kwargs: as ``Contrast``.
        channel_order (str): ``'bgr'`` or ``'rgb'``. Defaults to ``'bgr'``.
    """
    _enhancer = ImageEnhance.Contrast
