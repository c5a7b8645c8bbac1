"""grouped_matmul: groups of GROUP_M tile-rows, tile-row fastest, walked as a serpentine (odd tile-columns
go back up the group), so consecutive programs share a tile-row of a at every column change too."""

import triton
import triton.language as tl


@triton.jit
def _serpentine_tile(pid, n_row_tiles, n_col_tiles, GROUP_M: tl.constexpr):
    per_group = GROUP_M * n_col_tiles
    first = (pid // per_group) * GROUP_M
    height = tl.minimum(n_row_tiles - first, GROUP_M)
    local = pid % per_group
    pid_n = local // height
    r = local % height
    r = tl.where(pid_n % 2 == 0, r, height - 1 - r)
    return first + r, pid_n


@triton.jit
def grouped_matmul_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_m, pid_n = _serpentine_tile(pid, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    tl.store(
        out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on,
        acc.to(out_ptr.dtype.element_ty),
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


def grouped_matmul(a, b, out):
    """out[:] = a @ b for a of shape (M, K) and b of shape (K, N), views of any strides. Returns out."""
    M, K = a.shape
    N = b.shape[1]
    BLOCK_M, BLOCK_N = 128, 128
    BLOCK_K = 64 if a.element_size() == 2 else 32
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    grouped_matmul_kernel[grid](
        a,
        b,
        out,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        GROUP_M=8,
        num_warps=8,
        num_stages=3,
    )
    return out
