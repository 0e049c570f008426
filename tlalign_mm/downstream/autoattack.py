"""Adversarial robustness of an mmpretrain classifier with AutoAttack.

AutoAttack (Croce & Hein, "Reliable evaluation of adversarial robustness
with an ensemble of diverse parameter-free attacks", ICML 2020) is run from
the ``pyautoattack`` package: the attack code of fra31/auto-attack@a392200
(APGD, FAB, Square unchanged but for relative imports) under a refactored
``AutoAttack`` front end (keyword arguments, ``logging``). We do not
implement any attack.

The attacks work on images in ``[0, 1]`` pixel space with an ``eps`` ball in
that space, so the classifier is wrapped (:class:`PixelSpaceClassifier`) to
take ``[0, 1]`` RGB images and apply its data preprocessor's normalisation
inside the attacked function: the gradient flows through it and the clip to
``[0, 1]`` is the image's own range.

Data flow::

    dataloader batch (uint8, as loaded) --pixel_batch--> x in [0, 1], labels
    x --AutoAttack(PixelSpaceClassifier)--> x_adv, |x_adv - x| <= eps
    clean / robust accuracy (our own forward on x and x_adv), Wilson 95% CI
"""
import math
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
from scipy.stats import binomtest

__all__ = [
    'ATTACKS', 'NORMS', 'VERSIONS', 'PixelSpaceClassifier', 'pixel_batch',
    'subset_indices', 'wilson_interval', 'autoattack_accuracy',
    'build_attack_dataloader'
]

#: AutoAttack's threat models (fra31/auto-attack ``AutoAttack(norm=...)``).
NORMS = ('Linf', 'L2', 'L1')
#: its versions: ``standard`` (APGD-CE, APGD-T, FAB-T, Square), ``plus``
#: (all six attacks, more restarts), ``rand`` (APGD-CE/DLR with EOT, for
#: randomised defences) and ``custom`` (the attacks you list).
VERSIONS = ('standard', 'plus', 'rand', 'custom')
#: the attacks ``custom`` can list.
ATTACKS = ('apgd-ce', 'apgd-dlr', 'fab', 'square', 'apgd-t', 'fab-t')
# AutoAttack's targeted attacks try the 9 runner-up classes
_TARGETS = 9


class PixelSpaceClassifier(nn.Module):
    """An mmpretrain classifier that takes images in ``[0, 1]``.

    ``forward(x)`` is ``classifier((255 * x - mean) / std, mode='tensor')``
    with the ``mean``/``std`` (0-255 scale, the channel order after
    ``to_rgb``) of the classifier's ``ClsDataPreprocessor``: exactly its
    test-time preprocessing of a collated uint8 batch divided by 255, up to
    float rounding. The classifier is put in eval mode and its parameters
    are frozen (the attacks need gradients of the input only).

    Args:
        classifier (nn.Module): an mmpretrain classifier whose
            ``forward(inputs, mode='tensor')`` returns ``(B, K)`` logits.
        mean (Sequence[float] | torch.Tensor, optional): per-channel mean,
            0-255 scale; ``None``: no normalisation.
        std (Sequence[float] | torch.Tensor, optional): per-channel std.
    """

    def __init__(self, classifier: nn.Module, mean=None, std=None):
        super().__init__()
        self.classifier = classifier.eval().requires_grad_(False)
        if (mean is None) != (std is None):
            raise ValueError('Give both mean and std, or neither.')
        if mean is None:
            mean, std = [0.0], [1.0]
        self.register_buffer(
            'mean', torch.as_tensor(mean, dtype=torch.float32).reshape(
                1, -1, 1, 1).clone(), persistent=False)
        self.register_buffer(
            'std', torch.as_tensor(std, dtype=torch.float32).reshape(
                1, -1, 1, 1).clone(), persistent=False)

    @classmethod
    def from_classifier(cls, classifier: nn.Module) -> 'PixelSpaceClassifier':
        """Wrap ``classifier`` with its own data preprocessor's
        normalisation.

        Raises:
            ValueError: the preprocessor is not mmpretrain's
                ``ClsDataPreprocessor`` (or a subclass), or it pads (padding
                is added after normalisation, so AutoAttack would perturb
                the padding too).
        """
        from mmpretrain.models.utils import ClsDataPreprocessor
        pre = getattr(classifier, 'data_preprocessor', None)
        if not isinstance(pre, ClsDataPreprocessor):
            raise ValueError(
                'AutoAttack needs the classifier\'s normalisation: expected '
                "mmpretrain's ClsDataPreprocessor (or a subclass) as "
                f'data_preprocessor, got {type(pre).__name__}.')
        if pre.pad_size_divisor > 1:
            raise ValueError(
                f'data_preprocessor.pad_size_divisor={pre.pad_size_divisor}:'
                ' padding is added after normalisation and would be '
                'attacked as if it were image. Use a test pipeline that '
                'gives a fixed size (e.g. CenterCrop) and pass '
                '--cfg-options model.data_preprocessor.pad_size_divisor=1.')
        if not pre._enable_normalize:
            return cls(classifier)
        return cls(classifier, pre.mean.flatten().cpu(),
                   pre.std.flatten().cpu())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, K)`` of images ``x`` ``(B, C, H, W)`` in
        ``[0, 1]``."""
        logits = self.classifier((x * 255 - self.mean) / self.std,
                                 mode='tensor')
        if not (isinstance(logits, torch.Tensor) and logits.dim() == 2):
            raise TypeError(
                "AutoAttack needs (B, K) logits from the classifier's "
                "forward(mode='tensor'); got "
                f'{getattr(logits, "shape", type(logits))}.')
        return logits


def pixel_batch(data_preprocessor: nn.Module,
                data: dict) -> Tuple[torch.Tensor, torch.Tensor]:
    """A collated mmpretrain batch as the attacks see it.

    The first steps of ``ClsDataPreprocessor.forward`` (move to its device,
    BGR -> RGB if ``to_rgb``, float), then ``/ 255`` instead of the
    normalisation, which :class:`PixelSpaceClassifier` applies.

    Args:
        data_preprocessor (nn.Module): the classifier's
            ``ClsDataPreprocessor``.
        data (dict): a batch from the dataloader (``inputs``: uint8
            ``(B, C, H, W)`` or a list of ``(C, H, W)``, ``data_samples``
            with ``gt_label``).

    Returns:
        tuple: images ``(B, C, H, W)`` in ``[0, 1]`` and labels ``(B,)``.
    """
    inputs = data_preprocessor.cast_data(data['inputs'])
    if isinstance(inputs, (list, tuple)):
        shapes = {tuple(i.shape) for i in inputs}
        if len(shapes) > 1:
            raise ValueError(
                f'Images of one batch differ in size ({sorted(shapes)}); '
                'AutoAttack needs a test pipeline with a fixed output size '
                '(e.g. CenterCrop).')
        inputs = torch.stack(list(inputs))
    if data_preprocessor.to_rgb and inputs.size(1) == 3:
        inputs = inputs.flip(1)
    x = inputs.float() / 255
    samples = data['data_samples']
    labels = torch.stack([s.gt_label.reshape(-1)[0] for s in samples])
    return x, labels.to(x.device)


def subset_indices(length: int, num_images: Optional[int],
                   seed: int = 0) -> Optional[List[int]]:
    """A seeded random subset of ``range(length)``, in dataset order;
    ``None`` (everything) when ``num_images`` is ``None`` or covers it."""
    if num_images is None or num_images >= length:
        return None
    if num_images < 1:
        raise ValueError(f'num_images must be positive, got {num_images}.')
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(length, num_images, replace=False).tolist())


def wilson_interval(correct: int, total: int) -> Tuple[float, float]:
    """Wilson score 95% interval of an accuracy measured on ``total``
    images (scipy's ``binomtest(...).proportion_ci(method='wilson')``)."""
    if total == 0:
        return (float('nan'), float('nan'))
    ci = binomtest(correct, total).proportion_ci(method='wilson')
    return (float(ci.low), float(ci.high))


def _norm_of(delta: torch.Tensor, norm: str) -> torch.Tensor:
    flat = delta.reshape(len(delta), -1)
    if norm == 'Linf':
        return flat.abs().amax(1)
    return flat.norm(p=2 if norm == 'L2' else 1, dim=1)


def check_attack_args(norm: str, eps: float, version: str,
                      attacks: Optional[Sequence[str]]) -> None:
    """Early, clear errors for options AutoAttack would reject late or
    misread."""
    if norm not in NORMS:
        raise ValueError(f'norm must be one of {NORMS}, got {norm!r}.')
    if not (eps >= 0 and math.isfinite(eps)):
        raise ValueError(f'eps must be finite and >= 0, got {eps}.')
    if version not in VERSIONS:
        raise ValueError(f'version must be one of {VERSIONS}, got '
                         f'{version!r}.')
    if version == 'custom':
        if not attacks:
            raise ValueError("version='custom' needs the attacks to run, "
                             f'some of {ATTACKS}.')
        unknown = [a for a in attacks if a not in ATTACKS]
        if unknown:
            raise ValueError(f'Unknown attacks {unknown}; AutoAttack has '
                             f'{ATTACKS}.')
    elif attacks:
        raise ValueError(f"attacks are chosen by version={version!r}; list "
                         "them only with version='custom'.")


def autoattack_accuracy(model: nn.Module,
                        batches: Iterable[Tuple[torch.Tensor, torch.Tensor]],
                        norm: str = 'Linf',
                        eps: float = 4 / 255,
                        version: str = 'standard',
                        attacks: Optional[Sequence[str]] = None,
                        seed: int = 0,
                        progress=None) -> Dict:
    """Clean and AutoAttack robust top-1 accuracy of ``model``.

    Each batch is attacked on its own (AutoAttack treats images
    independently; this bounds memory) with the same attack seed, inside
    ``torch.random.fork_rng`` (the attacks reseed torch's global RNG).
    Accuracies are ours, not AutoAttack's bookkeeping: the model's argmax
    on ``x`` and on the returned ``x_adv``, whose distance to ``x`` is
    checked to be within ``eps`` (and ``x_adv`` within ``[0, 1]``).

    With fewer than 10 classes, the targeted attacks (APGD-T, FAB-T) target
    all ``K - 1`` other classes instead of 9 (AutoAttack would index past
    the logits); with 10 or more (ImageNet) nothing changes.

    Args:
        model (nn.Module): images ``(B, C, H, W)`` in ``[0, 1]`` -> logits
            ``(B, K)``, e.g. a :class:`PixelSpaceClassifier`.
        batches (Iterable): ``(x, labels)`` pairs as :func:`pixel_batch`
            gives, on the model's device.
        norm (str): ``'Linf'``, ``'L2'`` or ``'L1'``.
        eps (float): the radius of the threat model in ``[0, 1]`` pixel
            units.
        version (str): one of :data:`VERSIONS`.
        attacks (Sequence[str], optional): with ``version='custom'``, some
            of :data:`ATTACKS`.
        seed (int): the attacks' seed.
        progress: an object with ``update(n)`` (e.g. mmengine's
            ``ProgressBar``), told the number of images of each batch.

    Returns:
        dict: ``num_images``, ``num_classes``, ``clean_correct``,
        ``robust_correct``, ``clean_accuracy`` and ``robust_accuracy`` (%),
        their Wilson 95% intervals ``*_ci95`` (%), ``max_perturbation``
        (largest ``norm`` distance of an ``x_adv`` to its image),
        ``attacks`` (those run) and ``seconds``.
    """
    from pyautoattack import AutoAttack
    check_attack_args(norm, eps, version, attacks)
    device = next((p.device for p in model.parameters()),
                  torch.device('cpu'))
    forks = [device] if device.type == 'cuda' else []
    adversary = None
    total = clean = robust = 0
    max_perturbation = 0.0
    start = time.time()
    for x, labels in batches:
        x, labels = x.to(device), labels.to(device)
        with torch.no_grad():
            logits = model(x)
        clean_pred, num_classes = logits.argmax(1), logits.shape[1]
        if adversary is None:
            adversary = AutoAttack(
                model, norm=norm, eps=eps, version=version, seed=seed,
                device=device,
                attacks=list(attacks) if version == 'custom' else None)
            targets = min(_TARGETS, num_classes - 1)
            adversary.apgd_targeted.n_target_classes = min(
                adversary.apgd_targeted.n_target_classes, targets)
            adversary.fab.n_target_classes = min(
                adversary.fab.n_target_classes, targets)
        with torch.random.fork_rng(devices=forks):
            x_adv, _ = adversary.run_standard_evaluation(
                x, labels, batch_size=len(x))
        x_adv = x_adv.to(device)
        distance = _norm_of(x_adv - x, norm)
        slack = 1e-5 * max(1.0, eps)
        if distance.max() > eps + slack or x_adv.min() < -slack or \
                x_adv.max() > 1 + slack:
            raise RuntimeError(
                f'AutoAttack returned images outside the {norm} ball of '
                f'radius {eps} (largest distance {distance.max():.6g}) or '
                f'outside [0, 1] ({x_adv.min():.6g}..{x_adv.max():.6g}).')
        with torch.no_grad():
            adv_pred = model(x_adv).argmax(1)
        total += len(x)
        clean += int((clean_pred == labels).sum())
        robust += int((adv_pred == labels).sum())
        max_perturbation = max(max_perturbation, float(distance.max()))
        if progress is not None:
            progress.update(len(x))
    if total == 0:
        raise ValueError('No images to attack: the dataloader is empty.')

    def percent(pair):
        return [100 * v for v in pair]

    return dict(
        num_images=total,
        num_classes=num_classes,
        clean_correct=clean,
        robust_correct=robust,
        clean_accuracy=100 * clean / total,
        robust_accuracy=100 * robust / total,
        clean_accuracy_ci95=percent(wilson_interval(clean, total)),
        robust_accuracy_ci95=percent(wilson_interval(robust, total)),
        max_perturbation=max_perturbation,
        attacks=list(adversary.attacks_to_run),
        seconds=time.time() - start)


def build_attack_dataloader(cfg,
                            split: str = 'test',
                            num_images: Optional[int] = None,
                            batch_size: Optional[int] = None,
                            seed: int = 0):
    """The config's ``{split}_dataloader`` (falling back to the other of
    test/val), unshuffled, on a seeded random subset of ``num_images``
    images (:func:`subset_indices`; all of them by default).

    Args:
        cfg (mmengine.Config): a classification config, its default scope
            already set (:func:`tlalign_mm.analysis.session.load_config`).
        split (str): ``'test'`` or ``'val'``.
        num_images (int, optional): how many images to attack.
        batch_size (int, optional): overrides the loader's batch size.
        seed (int): seed of the subset.

    Returns:
        torch.utils.data.DataLoader
    """
    from mmengine.registry import DATASETS
    from mmengine.runner import Runner

    from tlalign_mm.analysis.session import dataloader_cfg
    loader = dataloader_cfg(cfg, split)
    dataset = loader['dataset']
    if isinstance(dataset, dict):
        dataset = DATASETS.build(dataset)
    indices = subset_indices(len(dataset), num_images, seed)
    if indices is not None:
        dataset.get_subset_(indices)
    loader['dataset'] = dataset
    if batch_size:
        loader['batch_size'] = batch_size
    sampler = dict(loader.get('sampler') or dict(type='DefaultSampler'))
    sampler['shuffle'] = False
    loader['sampler'] = sampler
    return Runner.build_dataloader(loader)
