"""Distributed training and testing on machines without CUDA."""
import datetime
import logging

import torch
from mmengine.config import ConfigDict
from mmengine.logging import print_log


def setup_cpu_distributed(cfg):
    """Initialise ``torch.distributed`` for ``--launcher pytorch`` on CPU.

    mmengine's ``init_dist`` always calls ``torch.cuda.set_device`` and
    ``Runner.wrap_model`` passes ``device_ids=[LOCAL_RANK]`` to DDP, both of
    which fail without CUDA. When CUDA is unavailable this function
    initialises the process group itself (``nccl`` is switched to ``gloo``,
    with a log line), so the runner finds it ready and skips ``init_dist``,
    and it makes DDP wrap the CPU model with ``device_ids=None``.
    """
    if cfg.launcher != 'pytorch' or torch.cuda.is_available():
        return
    import torch.distributed as torch_dist
    from mmengine.device import get_device
    if get_device() != 'cpu':  # NPU, MLU, MPS, ...: leave it to mmengine
        return

    env_cfg = cfg.setdefault('env_cfg', ConfigDict())
    dist_cfg = env_cfg.setdefault('dist_cfg', ConfigDict())
    backend = dist_cfg.get('backend', 'nccl')
    if backend == 'nccl':
        print_log(
            'CUDA is not available: switching the distributed backend in '
            "`env_cfg.dist_cfg` from 'nccl' to 'gloo'.",
            logger='current',
            level=logging.WARNING)
        backend = dist_cfg.backend = 'gloo'

    if not torch_dist.is_initialized():
        kwargs = {k: v for k, v in dist_cfg.items() if k != 'backend'}
        if kwargs.get('timeout') is not None:
            kwargs['timeout'] = datetime.timedelta(seconds=kwargs['timeout'])
        torch_dist.init_process_group(backend=backend, **kwargs)

    model_wrapper_cfg = cfg.get('model_wrapper_cfg', None)
    if model_wrapper_cfg is None:
        cfg.model_wrapper_cfg = ConfigDict(
            type='MMDistributedDataParallel',
            broadcast_buffers=False,
            find_unused_parameters=cfg.get('find_unused_parameters', False),
            device_ids=None)
    else:
        model_wrapper_cfg.setdefault('device_ids', None)
