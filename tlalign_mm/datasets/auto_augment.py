"""mmpretrain's ``AutoAugment`` with its ``hparams`` applied.

mmpretrain 1.2.0's ``AutoAugment.__init__``
(``mmpretrain/datasets/transforms/auto_augment.py:74-76``) merges
``hparams`` into ``self.policies`` and then builds its transforms from the
unmerged ``policies``: every ``hparams`` key is dropped for every op, while
``self.policies`` and the repr show them merged (``RandAugment`` builds from
the merged ones, ``auto_augment.py:231-235``).
"""
from typing import List, Optional, Union

from mmpretrain.datasets.transforms.auto_augment import (
    AUTOAUG_POLICIES,
    AutoAugment,
    merge_hparams,
)
from mmpretrain.registry import TRANSFORMS

__all__ = ['HParamsAutoAugment']


@TRANSFORMS.register_module()
class HParamsAutoAugment(AutoAugment):
    """mmpretrain's ``AutoAugment`` whose ops are built with the
    ``hparams`` its docstring promises: an op takes a key that its
    ``__init__`` names and its own dict lacks (mmpretrain's
    ``merge_hparams``, as ``RandAugment`` does). The same sub-policy draws.

    Args:
        policies (str | list[list[dict]]): as ``AutoAugment``.
        hparams (dict, optional): as ``AutoAugment``; given, each key must
            reach some op (a key no op takes, or that every op taking it
            sets itself, is an error, not silently dropped). Defaults to
            None: ``dict(pad_val=128)``, AutoAugment's default, unchecked.
    """

    def __init__(self, policies: Union[str, List[List[dict]]],
                 hparams: Optional[dict] = None):
        if isinstance(policies, str):
            if policies not in AUTOAUG_POLICIES:
                raise ValueError(
                    f'HParamsAutoAugment: unknown policies {policies!r}; '
                    f'mmpretrain has {list(AUTOAUG_POLICIES)}.')
            policies = AUTOAUG_POLICIES[policies]
        given = hparams is not None
        hparams = dict(pad_val=128) if hparams is None else dict(hparams)
        merged = [[merge_hparams(t, hparams) for t in sub]
                  for sub in policies]
        if given:
            unused = [k for k in hparams if not any(
                k in m and k not in t for sub, msub in zip(policies, merged)
                for t, m in zip(sub, msub))]
            if unused:
                raise ValueError(
                    f'HParamsAutoAugment: hparams {unused} reach no op of '
                    'the policies (no op\'s __init__ names them, or each '
                    'op that does sets its own); remove them or set them '
                    'on the ops.')
        # AutoAugment builds the ops from the policies it is given; merged,
        # merging again leaves them as they are
        super().__init__(policies=merged, hparams=hparams)
