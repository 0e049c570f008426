"""The benchmarked steps (``tools/benchmark.py``, ``tools/gpu_report.py``):
a TL-Align setting's ĀY path is its classifier's ``align_cfg``, and it is
the path the step computes with."""
import torch

from tlalign_mm.testing import steps
from tlalign_mm.testing.cost import step_cost

# gpu_report's --tiny DeiT-S: heads of 16, 'auto' takes the explicit path
TINY_VIT = dict(
    backbone=dict(type='VisionTransformer', img_size=32, patch_size=8,
                  arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                            feedforward_channels=64)),
    head=dict(type='VisionTransformerClsHead', in_channels=32))


def sdpa_calls(impl):
    """Fused attention calls of one training step with ``impl``, and the
    classifier's options."""
    torch.manual_seed(0)
    model = steps.build(TINY_VIT, 'tlalign', 10, dict(impl=impl))
    model.train()
    torch.manual_seed(1)
    batch = model.data_preprocessor(steps.fresh(steps.make_data(2, 32, 10)),
                                    training=True)
    ops, _ = step_cost(model, batch)
    return model.align_cfg.impl, sum(
        n for op, n in ops.ops.items() if 'scaled_dot_product' in op)


def test_the_path_given_is_the_path_taken():
    """The backbone's own attention is one fused call per block; the SDPA
    path adds one per block (forward only), the explicit path none."""
    (explicit, base), (sdpa, more) = map(sdpa_calls, ('explicit', 'sdpa'))
    assert (explicit, sdpa) == ('explicit', 'sdpa')
    assert more - base == 2  # one per block, 2 blocks
    assert steps.build(TINY_VIT, 'tlalign', 10).align_cfg.impl == 'auto'
