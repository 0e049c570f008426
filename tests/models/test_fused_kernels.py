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

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from tlalign_mm import align_labels
from tlalign_mm.models import aligned_forward

from . import zoo
from .dense import dense_reference
from .test_alignment import assert_history_close
from .test_tlalign_classifier import build, mixed_batch, model_cfg
from .zoo import assert_distributions, random_mix

FUSED = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
CUDA = pytest.param('cuda', marks=[pytest.mark.cuda, pytest.mark.skipif(
    not torch.cuda.is_available(), reason='needs a CUDA device')])


@pytest.fixture(autouse=True)
def sdpa_path(monkeypatch):
    """These tests are about the fused kernels: the labels take the SDPA
    path even for the narrow heads of the small test models (which would
    otherwise take the explicit path)."""
    from tlalign_mm.core import attention
    monkeypatch.setattr(attention, 'EXPLICIT_MAX_HEAD_DIM', 0)


@pytest.fixture(params=['cpu', CUDA])
def device(request, monkeypatch):
    # TF32 convolutions would round the patch embedding at 1e-3.
    monkeypatch.setattr(torch.backends.cudnn, 'allow_tf32', False)
    return request.param


@pytest.mark.parametrize('name', ['ViT', 'DeiT-S 224', 'Swin'])
def test_fused_kernel_matches_dense_reference(name, device):
    """On CPU the small ViT (the SDPA path; Swin's windows take it on CPU in
    test_alignment.py); on CUDA also DeiT-S's real geometry (197 tokens, 6
    heads of 64, +2 label channels) and Swin."""
    if name != 'ViT' and device == 'cpu':
        pytest.skip('CUDA only: on CPU the ViT case and test_alignment.py')
    cfg, side, box = {
        'ViT': (zoo.VIT, 32, None),
        'DeiT-S 224': (dict(type='VisionTransformer', arch='deit-small',
                            img_size=224, patch_size=16), 224,
                       (30, 150, 60, 200)),
        'Swin': (zoo.SWIN, 70, None)}[name]
    model = zoo.build(cfg)
    images, pw, targets = random_mix(2, 3 if box is None else 2, side, side,
                                     box=box)
    ref, ref_history = dense_reference(model, images, pw, targets)
    with sdpa_kernel(FUSED):
        labels, history = align_labels(
            copy.deepcopy(model).to(device), *(t.to(device) for t in (
                images, pw, targets)), return_token_labels=True)
    err = (labels.double().cpu() - ref).abs().max().item()
    print(f'{name}: max |fused({device}) - dense| = {err:.2e}')
    assert err <= 1e-5
    assert_history_close([h.cpu() for h in history], ref_history, targets)


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
    model = build(backbone=dict(model_cfg()['backbone'],
                                drop_path_rate=0.1)).to(device)
    model.backbone.train()  # drop-path on
    batch = mixed_batch(model)  # (the preprocessor moves it to the device)
    with sdpa_kernel(FUSED), torch.autocast(device, dtype=torch.bfloat16):
        losses = model(**batch, mode='loss')
        aligned = aligned_forward(model.backbone, batch['inputs'],
                                  batch['mix'].pixel_weights,
                                  keep_history=True)
    losses['loss'].backward()
    assert torch.isfinite(losses['loss'])
    if device == 'cuda':  # 2 layers, the loss's forward and ours
        assert len(calls) >= 2
    for labels in aligned.history:
        assert_distributions(labels)


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
