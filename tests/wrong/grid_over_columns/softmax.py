"""Wrong on purpose: one program per row, but the grid counts the columns. Programs past the last
row read and write whole rows past the end of x and out."""

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(
    x_ptr,  # input, (n_rows, n_cols), rows stride_x elements apart
    out_ptr,  # output, same shape, rows stride_out elements apart
    n_cols,
    stride_x,
    stride_out,
    BLOCK_N: tl.constexpr,  # power of two >= n_cols: a whole row is one block
):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x, out):
    """out[:] = softmax(x, dim=-1) for x of shape (n_rows, n_cols). Returns out."""
    n_rows, n_cols = x.shape
    grid = (n_cols,)  # BUG: (n_rows,)
    softmax_kernel[grid](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_N=triton.next_power_of_2(n_cols))
    return out
