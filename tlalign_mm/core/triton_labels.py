"""``mean_h softmax(q k^T s) @ Y`` in one fused GPU pass (Triton).

Under bf16/fp16 training the labels must still be float32. A float32
``scaled_dot_product_attention`` call pays a full float32 attention over
the head width (the labels padded to it) for an output of ``S`` (2-3)
channels: on an H200, 6.6 times the block's own bf16 attention at DeiT-S
sizes. This kernel computes it the way flash attention does, for labels
only: ``q k^T`` on the tensor cores from the block's own low-precision q and
k (exact products accumulated in float32), an online float32 softmax, ``P Y``
in IEEE float32 and the head mean, with no attention matrix and no float32
copy of q, k. Plain softmax attention only (no mask, no causal flag).
"""
import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - CPU-only installs without Triton
    triton = None


def available(query: torch.Tensor) -> bool:
    """Whether the kernel can run for this query tensor: a CUDA tensor, a
    head width of at most 256, and for bf16 a GPU with bf16 tensor cores
    (compute capability 8.0, Ampere, or newer)."""
    if triton is None or not query.is_cuda or query.shape[-1] > 256:
        return False
    if query.dtype == torch.bfloat16:
        return torch.cuda.get_device_capability(query.device) >= (8, 0)
    return True


if triton is not None:

    @triton.jit
    def _mean_head_labels_kernel(
            Q, K, Y, Out, scale, H, N, M, S,
            stride_qb, stride_qh, stride_qn, stride_qd,
            stride_kb, stride_kh, stride_km, stride_kd,
            stride_yb, stride_ym, stride_ys,
            stride_ob, stride_on, stride_os,
            D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
            BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr,
            QK_IEEE: tl.constexpr):
        pid_m = tl.program_id(0)
        b = tl.program_id(1)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        offs_s = tl.arange(0, BLOCK_S)
        total = tl.zeros((BLOCK_M, BLOCK_S), dtype=tl.float32)
        for h in range(0, H):
            q = tl.load(
                Q + b * stride_qb + h * stride_qh
                + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd,
                mask=(offs_m[:, None] < N) & (offs_d[None, :] < D), other=0.)
            m_i = tl.full((BLOCK_M, ), float('-inf'), dtype=tl.float32)
            l_i = tl.zeros((BLOCK_M, ), dtype=tl.float32)
            acc = tl.zeros((BLOCK_M, BLOCK_S), dtype=tl.float32)
            for start in range(0, M, BLOCK_N):
                offs_n = start + tl.arange(0, BLOCK_N)
                k = tl.load(
                    K + b * stride_kb + h * stride_kh
                    + offs_n[None, :] * stride_km
                    + offs_d[:, None] * stride_kd,
                    mask=(offs_n[None, :] < M) & (offs_d[:, None] < D),
                    other=0.)
                if QK_IEEE:
                    logits = tl.dot(q, k, input_precision='ieee')
                else:  # bf16/fp16 products are exact, accumulated in fp32
                    logits = tl.dot(q, k)
                logits = logits * scale
                logits = tl.where(offs_n[None, :] < M, logits,
                                  float('-inf'))
                m_new = tl.maximum(m_i, tl.max(logits, 1))
                alpha = tl.exp(m_i - m_new)
                p = tl.exp(logits - m_new[:, None])
                l_i = l_i * alpha + tl.sum(p, 1)
                y = tl.load(
                    Y + b * stride_yb + offs_n[:, None] * stride_ym
                    + offs_s[None, :] * stride_ys,
                    mask=(offs_n[:, None] < M) & (offs_s[None, :] < S),
                    other=0.)
                acc = acc * alpha[:, None] + tl.dot(p, y,
                                                    input_precision='ieee')
                m_i = m_new
            total += acc / l_i[:, None]
        total = total / H
        tl.store(
            Out + b * stride_ob + offs_m[:, None] * stride_on
            + offs_s[None, :] * stride_os, total,
            mask=(offs_m[:, None] < N) & (offs_s[None, :] < S))


def mean_head_labels(query: torch.Tensor, key: torch.Tensor,
                     labels: torch.Tensor, scale: float) -> torch.Tensor:
    """``mean_h(softmax(q_h k_h^T * scale)) @ labels`` ``(B, N, S)`` in
    float32 from ``(B, H, N, d)`` queries and ``(B, H, M, d)`` keys (one
    float dtype, on a GPU) and ``(B, M, S)`` labels."""
    if triton is None:
        raise RuntimeError('mean_head_labels needs Triton (it ships with '
                           'the CUDA builds of PyTorch on Linux).')
    B, H, N, d = query.shape
    M, S = key.shape[2], labels.shape[-1]
    labels = labels.float()
    out = labels.new_empty(B, N, S)
    block_m = 64
    grid = (triton.cdiv(N, block_m), B)
    _mean_head_labels_kernel[grid](
        query, key, labels, out, float(scale), H, N, M, S,
        *query.stride(), *key.stride(), *labels.stride(), *out.stride(),
        D=d, BLOCK_D=max(16, triton.next_power_of_2(d)), BLOCK_M=block_m,
        BLOCK_N=64, BLOCK_S=max(16, triton.next_power_of_2(S)),
        QK_IEEE=query.dtype == torch.float32)
    return out
