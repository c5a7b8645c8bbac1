"""Wrong on purpose: the strides are taken from the shapes, (N, 1) and (M, 1): right only for contiguous x and out."""

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
    # BEGIN SOLUTION
    # TODO: find this program's tile of x (program_id(0) along the rows, program_id(1) along the
    # TODO: columns); load it with x's strides and a mask for the ragged edge; store its transpose
    # TODO: (tl.trans) so that consecutive elements land in consecutive columns of an out row.
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    rows = pid_m * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,) rows of x = columns of out
    cols = pid_n * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,) columns of x = rows of out
    # 64-bit offsets: at 16384 x 16384 an offset reaches 2^28 elements, and a view's strides may
    # be larger than its shape; int32 would wrap past 2^31
    rows64 = rows.to(tl.int64)
    cols64 = cols.to(tl.int64)
    mask = (rows[:, None] < M) & (cols[None, :] < N)  # (BLOCK, BLOCK) the ragged edge of x
    x_ptrs = x_ptr + rows64[:, None] * stride_xm + cols64[None, :] * stride_xn  # (BLOCK, BLOCK) along x's rows
    tile = tl.load(x_ptrs, mask=mask)  # (BLOCK, BLOCK) tile[i, j] = x[rows[i], cols[j]]
    # out's tile: row j of out's block is column j of x's tile, so consecutive elements of the
    # store's block are consecutive columns of one out row
    out_ptrs = out_ptr + cols64[:, None] * stride_on + rows64[None, :] * stride_om  # (BLOCK, BLOCK) along out's rows
    out_mask = (cols[:, None] < N) & (rows[None, :] < M)  # (BLOCK, BLOCK) = tl.trans(mask)
    tl.store(out_ptrs, tl.trans(tile), mask=out_mask)
    # END SOLUTION


def tiled_transpose(x, out):
    """out[:] = x.T for x of shape (M, N) and out of shape (N, M), views of any strides. Returns out."""
    M, N = x.shape
    # BEGIN SOLUTION
    # TODO: pick BLOCK (a power of two) and num_warps, launch a 2-D grid of
    # TODO: (cdiv(M, BLOCK), cdiv(N, BLOCK)) programs, and pass both tensors' two strides.
    # 64 x 64 tiles with 8 warps: 16 elements per thread, 16 KB of fp32 through shared memory per
    # program; BLOCK 32 halves each row's run to 128 bytes of fp32, a single fully used line.
    BLOCK = 64
    grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
    transpose_kernel[grid](
        x, out, M, N,
        N, 1, M, 1,  # BUG: strides taken from the shapes
        BLOCK=BLOCK, num_warps=8,
    )  # fmt: skip
    # END SOLUTION
    return out
