"""Hostile (found by a red-team review): torch transposes (x.t().contiguous(), a view and a copy,
both once on the guard's allow-list); one kernel reads x and throws it away, another copies torch's
result into out. contiguous() of a strided tensor is a copy: torch compute in the launcher."""

import triton
import triton.language as tl


@triton.jit
def rows_kernel(src_ptr, dst_ptr, R, C, s_r, s_c, d_r, d_c, STORE: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    tile = tl.load(src_ptr + rows[:, None].to(tl.int64) * s_r + cols[None, :] * s_c, mask=mask)
    if STORE:
        tl.store(dst_ptr + rows[:, None].to(tl.int64) * d_r + cols[None, :] * d_c, tile, mask=mask)


def tiled_transpose(x, out):
    M, N = x.shape
    xt = x.t().contiguous()  # (N, M): the transpose, made by torch
    B = 64
    rows_kernel[(triton.cdiv(M, B), triton.cdiv(N, B))](
        x, x, M, N, x.stride(0), x.stride(1), 0, 0, STORE=False, BLOCK=B
    )
    rows_kernel[(triton.cdiv(N, B), triton.cdiv(M, B))](
        xt, out, N, M, xt.stride(0), xt.stride(1), out.stride(0), out.stride(1), STORE=True, BLOCK=B
    )
    return out
