"""The alignment on the fused attention kernels, on CPU and, where there is
one, on a CUDA device (CI has none; run this file on a GPU machine).

``head_mean_attention``'s SDPA path computes ``Ā Y`` with the labels as
values of a fused attention call. Here real models run with the explicit
path switched off, so a call the fused kernels (CPU flash; CUDA flash /
memory-efficient) cannot take fails instead of silently running unfused, and
the labels are checked against the dense references.

    python -m pytest tests/models/test_fused_kernels.py -s
"""
import copy

import numpy as np
import pytest
import torch
from mmpretrain.registry import MODELS
from torch.nn.attention import SDPBackend, sdpa_kernel

from tlalign_mm import align_labels
from tlalign_mm.models import aligned_forward

from .dense_reference import dense_vit_labels
from .dense_reference_swin import dense_swin_labels
from .mixes import assert_history_close, random_mix
from .test_swin_alignment import build_swin
from .test_tlalign_classifier import fake_batch, model_cfg
from .test_vit_alignment import build_vit

FUSED = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
CUDA = pytest.param('cuda', marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason='needs a CUDA device'))


@pytest.fixture(autouse=True)
def sdpa_path(monkeypatch):
    """These tests are about the fused kernels: the labels take the SDPA
    path even for the narrow heads of the small test models (which would
    otherwise take the explicit path)."""
    from tlalign_mm.core import attention
    monkeypatch.setattr(attention, 'EXPLICIT_MAX_HEAD_DIM', 0)


@pytest.fixture(params=['cpu', CUDA])
def device(request):
    if request.param == 'cpu':
        yield 'cpu'
        return
    # TF32 convolutions would round the patch embedding at 1e-3.
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield 'cuda'
    torch.backends.cudnn.allow_tf32 = before


@pytest.mark.parametrize('S', [2, 3])
def test_vit_fused_kernel_matches_dense_reference(S, device):
    vit = build_vit()
    images, pw, targets = random_mix(3, S, 32, 32)
    with torch.no_grad():
        ref, ref_history, _ = dense_vit_labels(
            vit, images, pw, targets, pw.mean((2, 3)), patch=8)
    with sdpa_kernel(FUSED):
        labels, history = align_labels(
            copy.deepcopy(vit).to(device),
            *[t.to(device) for t in (images, pw, targets)],
            return_token_labels=True)
    err = (labels.double().cpu() - ref).abs().max().item()
    print(f'ViT S={S}: max |fused({device}) - dense| = {err:.2e}')
    assert err <= 1e-5
    assert_history_close(history, ref_history, len(ref_history), targets)
    assert (ref_history[-1] - ref_history[0]).abs().max() > 1e-3


def test_deit_small_224_matches_dense_reference(device):
    """The real geometry: 197 tokens, 6 heads of 64 (+2 label channels)."""
    torch.manual_seed(0)
    vit = MODELS.build(dict(type='VisionTransformer', arch='deit-small',
                            img_size=224, patch_size=16))
    vit.init_weights()
    vit.eval()
    images, pw, targets = random_mix(2, 2, 224, 224, box=(30, 150, 60, 200))
    with torch.no_grad():
        ref, _, _ = dense_vit_labels(copy.deepcopy(vit).double(),
                                     images.double(), pw.double(),
                                     targets.double(),
                                     pw.mean((2, 3)).double(),
                                     patch=16)
    with sdpa_kernel(FUSED):
        labels = align_labels(vit.to(device),
                              *[t.to(device) for t in (images, pw, targets)])
    err = (labels.double().cpu() - ref).abs().max().item()
    print(f'DeiT-S 224: max |fused({device}) - dense| = {err:.2e}')
    assert err <= 1e-5


def test_bf16_training_step_stays_fused_and_fp32_exact(device, monkeypatch):
    """bf16 tokens in the fused kernel, float32 labels from the recorded
    bf16 q, k (CPU: a flash call; CUDA: the Triton kernel): the loss is finite
    and the labels are distributions to 1e-6."""
    calls = []
    if device == 'cuda':
        from tlalign_mm.core import triton_labels
        kernel = triton_labels.mean_head_labels
        monkeypatch.setattr(triton_labels, 'mean_head_labels',
                            lambda *a: calls.append(1) or kernel(*a))
    torch.manual_seed(0)
    model = MODELS.build(model_cfg(drop_path_rate=0.1)).to(device)
    model.init_weights()
    model.train()
    np.random.seed(1)
    data = fake_batch(4)
    data['inputs'] = [x.to(device) for x in data['inputs']]
    batch = model.data_preprocessor(data, training=True)
    with sdpa_kernel(FUSED), torch.autocast(device, dtype=torch.bfloat16):
        losses = model(**batch, mode='loss')
        aligned = aligned_forward(
            model.backbone, batch['inputs'],
            batch['mix'].pixel_weights,
            keep_history=True)
    losses['loss'].backward()
    assert torch.isfinite(losses['loss'])
    if device == 'cuda':  # 2 layers, the loss's forward and ours
        assert len(calls) >= 2
    for labels in aligned.history:
        assert labels.dtype == torch.float32
        assert (labels >= 0).all()
        torch.testing.assert_close(
            labels.sum(-1), torch.ones(labels.shape[:2], device=device),
            atol=1e-6, rtol=0)


@pytest.mark.parametrize('device', [CUDA])  # on CPU: test_swin_alignment
def test_swin_matches_dense_reference(device):
    swin = build_swin()
    images, pw, targets = random_mix(2, 3, 70, 70)
    ref, _, _ = dense_swin_labels(swin, images, pw, targets, patch=4)
    aligned = aligned_forward(copy.deepcopy(swin).to(device),
                              images.to(device), pw.to(device))
    labels = aligned.expand(targets.to(device)).double().cpu()
    err = (labels - ref).abs().max().item()
    print(f'Swin: max |{device} - dense| = {err:.2e}')
    assert err <= 1e-5


@pytest.mark.parametrize('device', [CUDA])
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16,
                                   torch.float32])
def test_triton_labels_kernel_on_gpu(device, dtype):
    """The kernel from low-precision q, k: float32-exact labels of the
    attention of those q, k, and the same as the float32 SDPA call."""
    from tlalign_mm.core.triton_labels import mean_head_labels
    torch.manual_seed(0)
    B, H, N, d, S = 16, 6, 197, 64, 3
    q = (torch.randn(B, H, N, d, device=device) * 2).to(dtype)
    k = (torch.randn(B, H, N, d, device=device) * 2).to(dtype)
    Y = torch.rand(B, N, S, device=device)**4
    Y = Y / Y.sum(-1, keepdim=True)
    out = mean_head_labels(q, k, Y, d**-0.5)
    A = torch.softmax(q.double() @ k.double().transpose(-2, -1) * d**-0.5,
                      -1).mean(1)
    err = (out.double() - A @ Y.double()).abs().max().item()
    print(f'Triton labels {dtype}: max |kernel - float64| = {err:.2e}')
    assert err < 1e-6
    v = torch.nn.functional.pad(Y[:, None].expand(B, H, N, S), (0, d - S))
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v)[..., :S].mean(1)
    assert (out - sdpa).abs().max() < 1e-6
