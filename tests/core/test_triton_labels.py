"""The Triton labels kernel, run by Triton's interpreter on the CPU.

The kernel only runs on GPUs in training; Triton's interpreter executes the
same kernel code on CPU tensors, so CI checks its arithmetic (block edges,
keys of another length, non-power-of-two widths, three sources) against a
float64 reference. The interpreter cannot load bf16 (it reads garbage), so
float16 stands in for the low-precision path here; bf16 is checked on a GPU
in tests/models/test_fused_kernels.py. (That CPU tensors never take the
kernel: every CPU test of ``align`` with ``impl='auto'``, which would fail
launching it, e.g. tests/core/test_core.py.)
"""
import os
import subprocess
import sys
import textwrap

import pytest

triton = pytest.importorskip('triton')
# Before 3.8 the interpreter cannot run a loop bounded by a kernel argument
# (TypeError: only 0-dimensional arrays ...; seen with 3.6); compiled
# kernels can, and the GPU test covers them.
OLD_INTERPRETER = tuple(int(x) for x in triton.__version__.split('.')[:2]) \
    < (3, 8)

SCRIPT = textwrap.dedent('''
    import torch
    from tlalign_mm.core.triton_labels import mean_head_labels
    torch.manual_seed(0)
    # block edges (70 queries, 50 keys: neither a multiple of the block),
    # keys of another length, a non-power-of-two width, three sources
    B, H, N, M, d, S = 1, 2, 70, 50, 24, 3
    for dtype in (torch.float32, torch.float16):
        q = (torch.randn(B, H, N, d) * 2).to(dtype)
        k = (torch.randn(B, H, M, d) * 2).to(dtype)
        Y = torch.rand(B, M, S) ** 4
        Y = Y / Y.sum(-1, keepdim=True)
        out = mean_head_labels(q, k, Y, d ** -0.5)
        A = torch.softmax(q.double() @ k.double().transpose(-2, -1)
                          * d ** -0.5, -1).mean(1)
        ref = A @ Y.double()
        assert out.dtype == torch.float32 and out.shape == (B, N, S)
        err = (out.double() - ref).abs().max().item()
        assert err < 1e-6, (dtype, err)
        # the reference is not trivial: attention moved the labels
        assert (ref - Y.double().mean(1, keepdim=True)).abs().max() > 1e-2
    print('ok')
''')


@pytest.mark.e2e
@pytest.mark.skipif(OLD_INTERPRETER, reason='Triton interpreter < 3.8')
def test_kernel_matches_float64_reference_in_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET='1')
    run = subprocess.run([sys.executable, '-c', SCRIPT], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().endswith('ok')

