"""How far a training target moved from the CutMix (area) target."""
from typing import Dict

import torch

#: The statistics, as the loss dict names them (``label_drift/<name>``).
DRIFT_NAMES = ('abs_diff', 'entropy', 'entropy_area', 'flip_rate')


def label_drift(target: torch.Tensor,
                area: torch.Tensor) -> Dict[str, torch.Tensor]:
    """The batch means, as 0-d tensors on the batch's device (nothing is
    read back to the host), of:

    - ``abs_diff``: ``|w_target - w_area|`` averaged over sources (for two
      sources, ``|lambda_target - lambda_area|``);
    - ``entropy``: the target's entropy (nats) over sources, ``-sum_s w log
      w`` (``ln 2`` for an even two-source mix, 0 for one source);
      ``entropy_area``: the same of the area target;
    - ``flip_rate``: the share of samples whose target gives the most weight
      to another source than the area target does.

    Args:
        target (Tensor): ``(B, S)`` the training target as source weights.
        area (Tensor): ``(B, S)`` each source's area share.

    Returns:
        dict: ``{'label_drift/<name>': value}`` for :data:`DRIFT_NAMES`.
    """
    target, area = target.detach().float(), area.detach().float()
    values = (
        (target - area).abs().mean(1).mean(),
        -torch.special.xlogy(target, target).sum(1).mean(),
        -torch.special.xlogy(area, area).sum(1).mean(),
        (target.argmax(1) != area.argmax(1)).float().mean(),
    )
    return {f'label_drift/{n}': v for n, v in zip(DRIFT_NAMES, values)}
