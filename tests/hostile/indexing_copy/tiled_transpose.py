"""Hostile (found by a third red-team review): torch transposes in the launcher through indexing: x.T[list] is advanced indexing, a gather that
makes a contiguous copy of x.T, and the guard lets __getitem__ through. One kernel reads x (and
throws it away), another copies torch's result row by row into out."""

import triton
import triton.language as tl


@triton.jit
def read_kernel(x_ptr, M, N, sxm, sxn, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.load(x_ptr + rows[:, None] * sxm + cols[None, :] * sxn, mask=mask)


@triton.jit
def copy_kernel(src_ptr, out_ptr, R, C, ssr, ssc, sor, soc, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    v = tl.load(src_ptr + rows[:, None] * ssr + cols[None, :] * ssc, mask=mask)
    tl.store(out_ptr + rows[:, None] * sor + cols[None, :] * soc, v, mask=mask)


def tiled_transpose(x, out):
    M, N = x.shape
    xt = x.T[list(range(N))]  # advanced indexing: torch's gather, a contiguous copy of x.T
    B = 64
    read_kernel[(triton.cdiv(M, B), triton.cdiv(N, B))](x, M, N, x.stride(0), x.stride(1), BLOCK=B)
    copy_kernel[(triton.cdiv(N, B), triton.cdiv(M, B))](
        xt, out, N, M, xt.stride(0), xt.stride(1), out.stride(0), out.stride(1), BLOCK=B
    )
    return out
