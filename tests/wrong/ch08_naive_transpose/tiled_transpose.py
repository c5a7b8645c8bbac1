"""Wrong on purpose: every value is right, but one row of x per program is stored as a column of out,
so a warp's 32 stores land in 32 different rows of out (32 sectors where 4 would do for fp32)."""

import triton
import triton.language as tl


@triton.jit
def transpose_kernel(
    x_ptr,  # x, (M, N): element (m, n) at x_ptr + m * stride_xm + n * stride_xn
    out_ptr,  # out, (N, M): element (n, m) at out_ptr + n * stride_on + m * stride_om
    M,
    N,
    stride_xm,
    stride_xn,
    stride_on,
    stride_om,
    BLOCK_N: tl.constexpr,  # elements of the row per step
):
    m = tl.program_id(axis=0)
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
        mask = cols < N
        row = tl.load(x_ptr + m * stride_xm + cols * stride_xn, mask=mask)  # coalesced along x's row
        tl.store(out_ptr + cols * stride_on + m * stride_om, row, mask=mask)  # BUG: down a column of out


def tiled_transpose(x, out):
    M, N = x.shape
    transpose_kernel[(M,)](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1), BLOCK_N=256)
    return out
