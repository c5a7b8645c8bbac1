"""A correct but slow tiled matmul (tests/slow: speed tier "works"): 16 x 16 x 16 tiles, one stage.

out = a @ b, one BLOCK_M x BLOCK_N tile of out per program, K walked BLOCK_K at a time.

Each program keeps its tile of the product in a float32 accumulator, adds one tl.dot of a
(BLOCK_M, BLOCK_K) slice of a and a (BLOCK_K, BLOCK_N) slice of b per step, and stores the tile once,
cast to out's dtype. Strides are passed for every tensor, so views (b.t(), rows of a wider matrix)
work as they are, without a copy.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
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
):
    # BEGIN SOLUTION
    # TODO: find this program's tile (pid_m, pid_n) from its number (consecutive programs walk along
    # TODO: a row of tiles); loop over K in steps of BLOCK_K, loading a (BLOCK_M, BLOCK_K) slice of a
    # TODO: and a (BLOCK_K, BLOCK_N) slice of b with masks, and add tl.dot of them into a float32
    # TODO: accumulator; store the tile in out's dtype, masked to the M x N edge.
    pid = tl.program_id(axis=0)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    pid_m = pid // n_col_tiles
    pid_n = pid % n_col_tiles
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    # Rows past M and columns past N wrap around to real ones: their loads stay inside a and b, their
    # results are never stored, and the loop needs a mask on K alone.
    a_rows = rows % M
    b_cols = cols % N
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + ks[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + ks[:, None] * stride_bk + b_cols[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        # the last step's slice may stick out past K: zeros there add nothing to the sum
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        # "ieee": float32 inputs are multiplied in float32. Triton's default on a GPU, TF32, keeps 10
        # bits of each input's mantissa: about 5e-4 relative error, 50x the float32 tolerance.
        # fp16 and bf16 inputs are multiplied exactly either way, into the float32 accumulator.
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    out_ptrs = out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


def tiled_matmul(a, b, out):
    """out[:] = a @ b for a of shape (M, K) and b of shape (K, N), views of any strides. Returns out."""
    M, K = a.shape
    N = b.shape[1]
    # BEGIN SOLUTION
    # TODO: pick BLOCK_M, BLOCK_N, BLOCK_K (powers of two, at least 16 for tl.dot), launch one
    # TODO: program per output tile on a 1-D grid, and pass every tensor's two strides. Take a smaller
    # TODO: tile for float32 inputs: num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 4 bytes of slices must
    # TODO: fit in the 227 KB of shared memory one program may have on Hopper.
    # bf16 at 8192^3 on an H200, programs in this row-by-row order (results/experiment_matmul_h200.json):
    # 128x256x64 tiles, 8 warps, 3 stages: 742 TFLOP/s, 93% of cuBLAS's 796 in the same run; 128x128x64:
    # 606. A wider tile loads each element of a once for 256 columns instead of 128. float32 with exact
    # products runs on the FMA units, not tensor cores: 128x128 with a BLOCK_K of 32 keeps three stages of
    # a and b within shared memory (3 x 32 KB) and the accumulator within the registers.
    BLOCK_M = BLOCK_N = BLOCK_K = 16  # the smallest tile tl.dot takes: every element of a and b loaded N/16 times
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](
        a, b, out, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4, num_stages=1,
    )  # fmt: skip
    # END SOLUTION
    return out
