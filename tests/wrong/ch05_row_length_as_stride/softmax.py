"""Wrong on purpose: out's rows are addressed n_cols elements apart, the row length, instead of
stride_out. Right for a contiguous output; into a wider matrix's view it writes between the rows."""

import triton
import triton.language as tl

from course_lib.tuned import row_config  # rows per program and warps, measured on an H200


@triton.jit
def softmax_kernel(
    x_ptr,  # input, (n_rows, n_cols), rows stride_x elements apart
    out_ptr,  # output, same shape, rows stride_out elements apart
    n_rows,
    n_cols,
    stride_x,
    stride_out,
    ROWS: tl.constexpr,  # rows per program
    BLOCK_N: tl.constexpr,  # power of two >= n_cols: a whole row is one block
):
    pid = tl.program_id(axis=0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    row_max = tl.max(x, axis=1)
    numerator = tl.exp(x - row_max[:, None])  # every exponent <= 0: no overflow
    denominator = tl.sum(numerator, axis=1)
    y = numerator / denominator[:, None]
    tl.store(out_ptr + rows64[:, None] * n_cols + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)  # wrong


def softmax(x, out):
    """out[:] = softmax(x, dim=-1) for x of shape (n_rows, n_cols). Returns out."""
    n_rows, n_cols = x.shape
    ROWS, BLOCK_N, num_warps = row_config(n_cols, x.element_size())
    grid = (triton.cdiv(n_rows, ROWS),)
    softmax_kernel[grid](
        x, out, n_rows, n_cols, x.stride(0), out.stride(0), ROWS=ROWS, BLOCK_N=BLOCK_N, num_warps=num_warps
    )
    return out
