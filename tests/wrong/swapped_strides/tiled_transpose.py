"""Wrong on purpose: x's strides are swapped, each index times the other dimension's stride. Right
for square inputs only; otherwise the tile reads x down its columns and past its end."""

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
    BLOCK: tl.constexpr,  # the tile is BLOCK x BLOCK elements
):
    rows = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,) rows of x = columns of out
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,) columns of x = rows of out
    mask = (rows[:, None] < M) & (cols[None, :] < N)  # (BLOCK, BLOCK)
    x_ptrs = x_ptr + rows[:, None] * stride_xn + cols[None, :] * stride_xm  # BUG: stride_xm with rows
    tile = tl.load(x_ptrs, mask=mask)  # (BLOCK, BLOCK)
    out_ptrs = out_ptr + cols[:, None] * stride_on + rows[None, :] * stride_om  # (BLOCK, BLOCK)
    tl.store(out_ptrs, tl.trans(tile), mask=tl.trans(mask))


def tiled_transpose(x, out):
    """out[:] = x.T for x of shape (M, N) and out of shape (N, M), views of any strides. Returns out."""
    M, N = x.shape
    BLOCK = 64
    grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
    transpose_kernel[grid](
        x, out, M, N,
        x.stride(0), x.stride(1), out.stride(0), out.stride(1),
        BLOCK=BLOCK,
    )  # fmt: skip
    return out
