"""Tiny-ImageNet for the SL-ViT configs, a class-folder ``CustomDataset``
that fails at build time naming the expected layout (mmpretrain's error
names the folder and suggests ``download=True``), and refuses an image
larger than :attr:`TinyImageNet.MAX_PIXELS` before it is decoded."""
import os
import os.path as osp

from mmpretrain.datasets import CustomDataset
from mmpretrain.registry import DATASETS
from PIL import Image


@DATASETS.register_module()
class TinyImageNet(CustomDataset):
    """Tiny-ImageNet-200 from the class folders of :attr:`LAYOUT` (classes:
    the sorted folder names, the same in both splits), ``split`` ``'train'``
    or ``'val'`` (the folder read: no ``data_prefix``), ``**kwargs`` as
    mmpretrain's ``CustomDataset``. The
    archive's ``val/`` is flat; move each image into its class folder
    first, e.g.::

        cd {data_root}/val && while read f c _; do mkdir -p $c && \\
            mv images/$f $c/; done < val_annotations.txt && rmdir images
    """

    LAYOUT = ('{cls} expects class folders:\n'
              '    {root}/train/<wnid>/images/*.JPEG  (as unpacked)\n'
              '    {root}/val/<wnid>/*.JPEG           (val/images/ moved into '
              'class folders with val/val_annotations.txt)\n'
              'with the same 200 <wnid> folders in both splits. Downloading '
              'is disabled.')
    #: the most pixels an image may have: 16 times Tiny-ImageNet's 64x64 (PIL
    #: decodes a 20 KB PNG that claims 178 M pixels, 2 GB, with a warning)
    MAX_PIXELS = 16 * 64 * 64

    def __init__(self, data_root: str = 'data/tiny-imagenet-200',
                 split: str = 'train', **kwargs):
        if split not in ('train', 'val'):
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        if 'data_prefix' in kwargs:  # it would be read, split ignored
            raise ValueError(
                'TinyImageNet reads the folder named by split (\'train\' or '
                f'\'val\'); got data_prefix={kwargs["data_prefix"]!r}: '
                'remove it and set split.')
        self.split = split
        super().__init__(data_root=data_root, data_prefix=split, **kwargs)

    def load_data_list(self):
        folder = self.img_prefix
        layout = self.LAYOUT.format(cls=type(self).__name__,
                                    root=self.data_root)
        if not osp.isdir(folder):
            raise FileNotFoundError(f'{folder} does not exist. {layout}')
        entries = sorted(os.listdir(folder))
        if 'val_annotations.txt' in entries or entries == ['images']:
            raise FileNotFoundError(
                f'{folder} has the archive\'s flat validation layout '
                '(images/ + val_annotations.txt), which would read as one '
                f'class. {layout}')
        classes = [e for e in entries if osp.isdir(osp.join(folder, e))]
        if not classes:
            raise FileNotFoundError(f'{folder} has no class folders. '
                                    f'{layout}')
        # class indices come from the sorted folder names of each split: a
        # folder missing from one split would shift every later label
        other = osp.join(self.data_root, 'val' if self.split == 'train'
                         else 'train')
        if osp.isdir(other):
            theirs = {e for e in os.listdir(other)
                      if osp.isdir(osp.join(other, e))}
            lacks, extra = sorted(theirs - set(classes)), \
                sorted(set(classes) - theirs)
            if lacks or extra:
                raise FileNotFoundError(
                    f'{folder} and {other} have different class folders '
                    f'({folder} lacks {lacks[:5]}, has extra {extra[:5]}): '
                    f'the labels of the two splits would not match. {layout}')
        return super().load_data_list()

    def prepare_data(self, idx):
        """The pipeline's result for sample ``idx``, once the image's header
        says it has at most :attr:`MAX_PIXELS` pixels."""
        path = self.get_data_info(idx)['img_path']
        with Image.open(path) as image:  # reads the header only
            width, height = image.size
        if width * height > self.MAX_PIXELS:
            # PIL's own error for this (it raises it only past 2x its
            # MAX_IMAGE_PIXELS, 179 M): the tools print it as one line
            raise Image.DecompressionBombError(
                f'{path} is {width}x{height} pixels, more than the '
                f'{self.MAX_PIXELS} {type(self).__name__} allows (its images '
                'are 64x64): refused before decoding')
        return super().prepare_data(idx)
