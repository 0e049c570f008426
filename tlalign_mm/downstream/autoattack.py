"""AutoAttack (Croce & Hein, ICML 2020) on an mmpretrain classifier: the
attacks are the ``pyautoattack`` package's (fra31/auto-attack's APGD, FAB
and Square under a refactored front end); nothing of it is reimplemented
here. The attacks perturb images in [0, 1] pixel space with an eps ball in
that space; the classifier's own ``ClsDataPreprocessor`` normalisation runs
inside the attacked function (:class:`PixelSpaceClassifier`), so the
gradient flows through it. ``tools/robustness/autoattack.py`` is the
command line."""
import argparse
import datetime
import time
from fractions import Fraction

import numpy as np
import torch
import torch.nn as nn
from mmengine.registry import DATASETS
from mmengine.runner import Runner
from scipy.stats import binomtest

from tlalign_mm.analysis.session import dataloader_cfg

#: the attacks ``--version custom`` can list (``AutoAttack(attacks=...)``)
ATTACKS = ('apgd-ce', 'apgd-dlr', 'fab', 'square', 'apgd-t', 'fab-t')


class PixelSpaceClassifier(nn.Module):
    """``classifier`` on images in ``[0, 1]``: ``forward(x)`` is
    ``classifier((255 * x - mean) / std, mode='tensor')`` with its
    ``ClsDataPreprocessor``'s ``mean`` / ``std`` (RGB after ``to_rgb``),
    i.e. its test-time preprocessing of a uint8 batch divided by 255. The
    classifier is put in eval mode with frozen parameters."""

    def __init__(self, classifier: nn.Module):
        super().__init__()
        from mmpretrain.models.utils import ClsDataPreprocessor
        pre = getattr(classifier, 'data_preprocessor', None)
        if not isinstance(pre, ClsDataPreprocessor):
            raise ValueError("AutoAttack needs mmpretrain's "
                             'ClsDataPreprocessor (the normalisation), got '
                             f'{type(pre).__name__}.')
        if pre.pad_size_divisor > 1:
            raise ValueError(
                f'data_preprocessor.pad_size_divisor={pre.pad_size_divisor}:'
                ' padding is added after normalisation and would be attacked'
                ' as image; use a fixed-size test pipeline and --cfg-options'
                ' model.data_preprocessor.pad_size_divisor=1.')
        self.classifier = classifier.eval().requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.classifier.data_preprocessor
        x = (x * 255 - pre.mean) / pre.std if pre._enable_normalize else \
            x * 255
        logits = self.classifier(x, mode='tensor')
        if not (torch.is_tensor(logits) and logits.dim() == 2):
            raise TypeError("AutoAttack needs (B, K) logits from forward("
                            f"mode='tensor'), got {type(logits).__name__} "
                            f'{getattr(logits, "shape", "")}.')
        return logits


def pixel_batch(pre, data: dict):
    """A collated batch as the attacks see it: ``ClsDataPreprocessor``'s
    first steps (device, BGR -> RGB) and ``/ 255`` instead of the
    normalisation; ``(x (B, C, H, W) in [0, 1], labels (B,))``."""
    inputs = data['inputs']
    if isinstance(inputs, (list, tuple)):
        inputs = torch.stack(list(inputs))
    inputs = inputs.to(pre.device)
    if pre.to_rgb and inputs.size(1) == 3:
        inputs = inputs.flip(1)
    labels = [s.gt_label.reshape(-1)[0] for s in data['data_samples']]
    return inputs.float() / 255, torch.stack(labels).to(inputs.device)


#: the attack objects of an ``AutoAttack`` and the names they run under
_ATTACK_OBJECTS = {'apgd-ce': 'apgd', 'apgd-dlr': 'apgd', 'apgd-t':
                   'apgd_targeted', 'fab': 'fab', 'fab-t': 'fab',
                   'square': 'square'}


def attack_steps(adversary, name: str) -> int:
    """Model evaluations per image of attack ``name`` as ``adversary`` has
    it set up: iterations (APGD, FAB; queries for Square) x restarts (x
    target classes for the targeted ones). The time-left estimate scales
    the measured seconds per step with it (FAB's steps cost more than
    APGD's: a rough guide until a batch has been timed)."""
    attack = getattr(adversary, _ATTACK_OBJECTS[name])
    targets = attack.n_target_classes if name.endswith('-t') else 1
    return getattr(attack, 'n_iter', getattr(attack, 'n_queries', 1)) * \
        attack.n_restarts * targets


def _attack_name(attr: str, attack) -> str:
    """The name of the attack ``attack`` (``adversary.<attr>``) runs now."""
    if attr == 'apgd':
        return f'apgd-{attack.loss}'
    if attr == 'fab':
        return 'fab-t' if attack.targeted else 'fab'
    return {'apgd_targeted': 'apgd-t', 'square': 'square'}[attr]


def _time_attacks(adversary, report) -> None:
    """Wrap ``perturb`` of each of ``adversary``'s attack objects so that
    ``report(name, images, seconds)`` follows every attack run."""
    for attr in set(_ATTACK_OBJECTS.values()):
        attack = getattr(adversary, attr)

        def timed(x, y, _perturb=attack.perturb, _attr=attr, _attack=attack):
            start = time.time()
            adv = _perturb(x, y)
            report(_attack_name(_attr, _attack), len(x), time.time() - start)
            return adv

        attack.perturb = timed


def print_progress(event: dict) -> None:
    """One line per attack of each batch, and per finished batch."""
    def hms(seconds):
        return str(datetime.timedelta(seconds=round(seconds)))

    where = f"batch {event['batch']}/{event['batches'] or '?'}"
    what = f"{event['attack']} on {event['images']} images: " \
        f"{event['seconds']:.1f} s" if event['attack'] else \
        f"done, {event['robust']}/{event['images']} robust so far"
    left = '' if event['left'] is None else \
        f", about {hms(event['left'])} left"
    print(f"autoattack: {where}, {what} (elapsed {hms(event['elapsed'])}"
          f'{left})', flush=True)


def autoattack_accuracy(model, batches, norm='Linf', eps=4 / 255,
                        version='standard', attacks=None, seed=0,
                        num_batches=None, progress=None) -> dict:
    """Clean and AutoAttack robust top-1 of ``model`` (``[0, 1]`` images
    -> logits) over ``(x, labels)`` batches, each attacked on its own with
    the same seed inside ``torch.random.fork_rng``; every returned image is
    checked to be within ``eps`` and ``[0, 1]``. With fewer than 10
    classes, the targeted attacks target all ``K - 1`` others (AutoAttack
    would index past the logits).

    ``progress(event)`` (e.g. :func:`print_progress`) is called after each
    attack of each batch (``attack``: its name, ``images``: how many it
    attacked, ``seconds``) and after each batch (``attack`` None,
    ``images``, ``robust``: the running totals), with ``batch`` (from 1),
    ``batches`` (``num_batches``), ``elapsed`` and ``left``: an estimate
    of the seconds left (None until one can be made), from the batches
    done or, in the first batch, from the seconds per step so far and the
    steps left (:func:`attack_steps`, the images of the last attack)."""
    from pyautoattack import AutoAttack
    device = next(model.parameters()).device
    adversary, total, clean, robust, largest = None, 0, 0, 0, 0.0
    start = time.time()
    timing = dict(batch=0, steps=0.0, seconds=0.0, done=[])

    def report(name, images, seconds):
        timing['steps'] += attack_steps(adversary, name) * images
        timing['seconds'] += seconds
        timing['done'].append(name)
        if progress is None:
            return
        rate = timing['seconds'] / max(timing['steps'], 1)
        todo = adversary.attacks_to_run[len(timing['done']):]
        left = rate * images * sum(attack_steps(adversary, a) for a in todo)
        batch_time = time.time() - timing['batch_start'] + left
        if timing['batch'] > 1:  # the batches done say more
            batch_time = (timing['batch_start'] - start) / (
                timing['batch'] - 1)
        later = (num_batches - timing['batch']) * batch_time if \
            num_batches else None
        progress(dict(batch=timing['batch'], batches=num_batches,
                      attack=name, images=images, seconds=seconds,
                      elapsed=time.time() - start,
                      left=None if later is None else left + later))

    for x, labels in batches:
        timing.update(batch=timing['batch'] + 1, done=[],
                      batch_start=time.time())
        with torch.no_grad():
            logits = model(x)
        if adversary is None:
            adversary = AutoAttack(model, norm=norm, eps=eps, version=version,
                                   seed=seed, device=device, attacks=attacks)
            for attack in (adversary.apgd_targeted, adversary.fab):
                attack.n_target_classes = min(attack.n_target_classes,
                                              logits.shape[1] - 1)
            _time_attacks(adversary, report)
        with torch.random.fork_rng(devices=[device] * (device.type == 'cuda')):
            x_adv, adv_pred = adversary.run_standard_evaluation(
                x, labels, batch_size=len(x))
        distance = torch.linalg.vector_norm(
            (x_adv - x).flatten(1), dim=1,
            ord={'Linf': float('inf'), 'L2': 2, 'L1': 1}[norm]).max().item()
        if distance > eps * (1 + 1e-5) + 1e-6 or not 0 <= x_adv.min() <= \
                x_adv.max() <= 1:
            raise RuntimeError(f'AutoAttack returned images outside the {norm}'
                               f' ball of radius {eps} or outside [0, 1].')
        total, largest = total + len(x), max(largest, distance)
        clean += int((logits.argmax(1) == labels).sum())
        robust += int((adv_pred == labels).sum())
        if progress is not None:
            elapsed = time.time() - start
            progress(dict(batch=timing['batch'], batches=num_batches,
                          attack=None, images=total, robust=robust,
                          elapsed=elapsed, left=None if num_batches is None
                          else elapsed / timing['batch'] *
                          (num_batches - timing['batch'])))
    if not total:
        raise ValueError('No images to attack: the dataloader is empty.')

    def ci95(correct):
        ci = binomtest(correct, total).proportion_ci(method='wilson')
        return [100 * float(ci.low), 100 * float(ci.high)]

    return dict(num_images=total, num_classes=logits.shape[1],
                clean_correct=clean, robust_correct=robust,
                clean_accuracy=100 * clean / total,
                robust_accuracy=100 * robust / total,
                clean_accuracy_ci95=ci95(clean),
                robust_accuracy_ci95=ci95(robust), max_perturbation=largest,
                attacks=list(adversary.attacks_to_run),
                seconds=time.time() - start)


def build_attack_dataloader(cfg, num_images=None, seed=0):
    """The config's test dataloader (else val), unshuffled, on a seeded
    random subset of ``num_images`` images (all of them by default)."""
    loader = dataloader_cfg(cfg, 'test')
    dataset = DATASETS.build(loader['dataset'])
    if num_images is not None and num_images < len(dataset):
        dataset.get_subset_(sorted(np.random.default_rng(seed).choice(
            len(dataset), num_images, replace=False).tolist()))
    loader.update(dataset=dataset, sampler=dict(type='DefaultSampler',
                                                shuffle=False))
    return Runner.build_dataloader(loader)


def parse_eps(text: str) -> float:
    try:
        return float(Fraction(text))
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(
            f'eps must be a number or a fraction like 4/255, got {text!r}')
