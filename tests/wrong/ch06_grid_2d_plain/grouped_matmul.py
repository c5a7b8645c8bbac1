"""Wrong on purpose: a 2-D grid of (tile-rows, tile-columns), pid_m = program_id(0), pid_n =
program_id(1), and no grouping. A GPU starts program_id(0) fastest, so the programs run column by
column: each wave reads every tile-row of a. The products are right; the order judge must fail it as
column by column (GROUP_M is still a config key, and unused)."""

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
    pid_m = tl.program_id(axis=0)  # the grid's own order: a GPU starts program_id(0) fastest
    pid_n = tl.program_id(axis=1)
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
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    grouped_matmul_kernel[grid](
        a, b, out, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
    )  # fmt: skip
    return out
