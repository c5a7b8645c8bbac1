"""Wrong on purpose: a is read through a TMA descriptor whatever its layout; rows 866 fp16 apart
(1732 bytes) break TMA's 16-byte rule, and the descriptor is refused before any launch."""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def padded_bmm_kernel(
    a_desc,  # a, (M, K), as a TMA descriptor with blocks of (BLOCK_M, BLOCK_K)
    e_ptr,  # e, (B, K, N)
    out_ptr,  # out, (B, M, N)
    M,
    N,
    K,
    stride_eb,
    stride_ek,
    stride_ob,
    stride_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    batch = tl.program_id(axis=1)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    pid_m = pid // n_col_tiles
    pid_n = pid % n_col_tiles
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    e_ptrs = e_ptr + batch * stride_eb + ks[:, None] * stride_ek + (cols % N)[None, :]  # (BLOCK_K, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k0])  # TMA fills with zeros beyond M and K
        e = tl.load(e_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, e, acc, input_precision="ieee")
        e_ptrs += BLOCK_K * stride_ek
    out_ptrs = out_ptr + batch * stride_ob + rows[:, None] * stride_om + cols[None, :]
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def padded_bmm(a, e, out):
    M, K = a.shape
    B, _, N = e.shape
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    a_desc = TensorDescriptor(a, shape=[M, K], strides=[a.stride(0), 1], block_shape=[BLOCK_M, BLOCK_K])  # BUG
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N), B)
    padded_bmm_kernel[grid](
        a_desc, e, out, M, N, K, e.stride(0), e.stride(1), out.stride(0), out.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
    )  # fmt: skip
    return out
