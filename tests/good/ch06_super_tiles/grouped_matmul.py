"""A correct grouped_matmul written differently from the course's: super-tiles. The programs go block
by block through blocks of GROUP_M x GROUP_M output tiles (8 x 8), each block row by row, the blocks row
by row; the last band of tile-rows and the last block of a band are smaller. A wave of 132 programs then
covers two blocks and a bit: 8 tile-rows of a and about 16 tile-columns of b at 8192^2, where row order
reads every tile-column. The order judge must pass it (until 2026-12-05 it failed it: on the probe's 10
x 10 tiles a wave of 10 tiles is part of one block and looks no better than row order)."""

import triton
import triton.language as tl


@triton.jit
def grouped_matmul_kernel(
    a_ptr,  # a, (M, K): element (m, k) at a_ptr + m * stride_am + k * stride_ak
    b_ptr,  # b, (K, N): element (k, n) at b_ptr + k * stride_bk + n * stride_bn
    out_ptr,  # out, (M, N): element (m, n) at out_ptr + m * stride_om + n * stride_on
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,  # rows of out per program
    BLOCK_N: tl.constexpr,  # columns of out per program
    BLOCK_K: tl.constexpr,  # depth of one tl.dot step
    GROUP_M: tl.constexpr,  # tile-rows per group
):
    pid = tl.program_id(axis=0)
    n_row_tiles = tl.cdiv(M, BLOCK_M)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    # super-tiles of GROUP_M x GROUP_M tiles, each walked row by row, the blocks row by row: a band of
    # GROUP_M tile-rows holds cdiv(n_col_tiles, GROUP_M) blocks; the last band and block may be smaller
    band = pid // (GROUP_M * n_col_tiles)
    band_rows = tl.minimum(n_row_tiles - band * GROUP_M, GROUP_M)
    in_band = pid % (GROUP_M * n_col_tiles)
    block = in_band // (band_rows * GROUP_M)
    block_cols = tl.minimum(n_col_tiles - block * GROUP_M, GROUP_M)
    in_block = in_band - block * band_rows * GROUP_M
    pid_m = band * GROUP_M + in_block // block_cols
    pid_n = block * GROUP_M + in_block % block_cols
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    # rows past M and columns past N wrap around to real ones: their loads stay inside a and b, and
    # their results are never stored
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")  # fp32 inputs: no TF32 (see tiled_matmul)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    out_ptrs = out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


# bf16 at 8192^3 on an H200 (results/experiment_matmul_h200.json): 128x256x64, 8 warps, 3 stages, in groups
# of 8 tile-rows: 781 TFLOP/s, 98% of cuBLAS's 796 in the same run (742 row by row); in the bench run, 782
# against cuBLAS's 783 (bench_grouped_matmul_h200.json). At K = 512 the order makes no difference beyond
# the noise (500 against 508; a and b fit in L2 there). The first config is the best found; the autotuner
# picks per shape. In CPU mode it runs each config once and keeps the first, so the list stays short.
grouped_matmul_kernel = triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=8, num_stages=3),
    ],
    key=["M", "N", "K"],
)(grouped_matmul_kernel)


def grouped_matmul(a, b, out):
    """out[:] = a @ b for a of shape (M, K) and b of shape (K, N), views of any strides. Returns out."""
    M, K = a.shape
    N = b.shape[1]
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    grouped_matmul_kernel[grid](
        a, b, out, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
    )  # fmt: skip
    return out
