"""Mixed batches for analysis: the config's data, mixed within each batch by
the recording batch augmentations, reproducibly."""
from contextlib import contextmanager
from typing import Iterator, NamedTuple, Optional

import numpy as np
import torch
import torch.nn.functional as F

from tlalign_mm.core.mix_record import MixRecord
from tlalign_mm.mixing import TLCutMix, TLMixup, TLResizeMix


class MixedBatch(NamedTuple):
    """One batch before mixing (``inputs`` ``(B0, 3, H, W)``, preprocessed)
    and after (``mixed`` ``(B, 3, H, W)``, ``B <= B0`` when cut to
    ``num_images``); ``record``: how (source ``s`` of sample ``b`` is
    ``inputs[record.source_index[b, s]]``); ``targets`` ``(B, S, C)``: each
    source's one-hot label."""
    inputs: torch.Tensor
    mixed: torch.Tensor
    record: MixRecord
    targets: torch.Tensor

    def source_images(self, s: int) -> torch.Tensor:
        """``(B, 3, H, W)`` the unmixed images of source ``s``."""
        return self.inputs[self.record.source_index[:, s]]


@contextmanager
def seeded(seed: int):
    """numpy's and torch's (CPU) global RNGs seeded inside, restored after:
    the recording augmentations draw from them like mmpretrain's."""
    state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        np.random.seed(seed)
        torch.manual_seed(seed)
        try:
            yield
        finally:
            np.random.set_state(state)


# The recording batch augmentations an analysis can mix with, by name.
MIXERS = {'cutmix': TLCutMix, 'mixup': TLMixup, 'resizemix': TLResizeMix}
MIXES = (*MIXERS, 'none')


def build_mixer(mix: str = 'cutmix', alpha: float = 1.0):
    """The :data:`MIXERS` augment named ``mix`` (its defaults but ``alpha``),
    or None for ``'none'``."""
    if mix == 'none':
        return None
    if mix not in MIXERS:
        raise ValueError(
            f'mix must be one of {", ".join(map(repr, MIXES))}, got {mix!r}.')
    return MIXERS[mix](alpha=alpha)


def mixed_batches(model, dataloader, mix: str = 'cutmix', alpha: float = 1.0,
                  seed: int = 0, num_images: Optional[int] = None,
                  max_batches: Optional[int] = None,
                  progress=None) -> Iterator[MixedBatch]:
    """Preprocess the dataloader's batches with the model's data
    preprocessor (test mode: no augmentation of its own) and mix each batch
    within itself, batch ``i`` with seed ``seed + i``.

    Args:
        model: the classifier (its ``data_preprocessor`` and
            ``head.num_classes``).
        mix (str): one of :data:`MIXES` (``'none'``: one source); ``alpha``
            its Beta parameter.
        num_images, max_batches (int, optional): stop after this many images
            (the last batch is cut after mixing) or batches.
        progress: with ``update(n)`` (e.g. mmengine's ``ProgressBar``), told
            each batch's images once the consumer is done with it.
    """
    mixer = build_mixer(mix, alpha)
    num_classes = getattr(model.head, 'num_classes', None) or \
        model.data_preprocessor.num_classes
    seen = 0
    for i, data in enumerate(dataloader):
        if max_batches is not None and i >= max_batches:
            break
        if num_images is not None and seen >= num_images:
            break
        with torch.no_grad():
            data = model.data_preprocessor(data, training=False)
        inputs = data['inputs']
        labels = torch.stack([s.gt_label.reshape(-1)[0]
                              for s in data['data_samples']])
        scores = F.one_hot(labels.to(inputs.device), num_classes).float()
        if mixer is None:
            mixed, record = inputs, MixRecord.identity(
                len(inputs), *inputs.shape[-2:], device=inputs.device)
        else:
            # The whole batch is mixed (partners come from all of it), then
            # cut to the images still wanted.
            with seeded(seed + i):
                mixed, _, record = mixer.mix_with_record(inputs, scores)
        keep = len(inputs) if num_images is None else \
            min(len(inputs), num_images - seen)
        targets = record.source_targets(scores)[:keep]
        mixed = mixed[:keep]
        record = MixRecord(*(t[:keep] for t in (
            record.pixel_weights, record.source_index, record.area_share)),
            record.mode)
        seen += keep
        yield MixedBatch(inputs, mixed, record, targets)
        if progress is not None:
            progress.update(keep)
