"""How far a training target moved from the CutMix (area) target."""
from typing import Dict

import torch

#: The statistics, as the loss dict names them (``label_drift/<name>``).
DRIFT_NAMES = ('abs_diff', 'entropy', 'entropy_area', 'flip_rate')


def label_drift(target: torch.Tensor,
                area: torch.Tensor) -> Dict[str, torch.Tensor]:
    """``{'label_drift/<name>': value}``, batch means as 0-d tensors on the
    batch's device (no host sync), of the ``(B, S)`` training ``target``
    against the ``(B, S)`` ``area`` shares:

    - ``abs_diff``: ``|w_target - w_area|`` averaged over sources;
    - ``entropy``, ``entropy_area``: ``-sum_s w log w`` (nats) of each;
    - ``flip_rate``: the share of samples whose target's largest source is
      another than the area target's.
    """
    target, area = target.detach().float(), area.detach().float()
    values = (
        (target - area).abs().mean(1).mean(),
        -torch.special.xlogy(target, target).sum(1).mean(),
        -torch.special.xlogy(area, area).sum(1).mean(),
        (target.argmax(1) != area.argmax(1)).float().mean(),
    )
    return {f'label_drift/{n}': v for n, v in zip(DRIFT_NAMES, values)}
