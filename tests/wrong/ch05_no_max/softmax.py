"""Wrong on purpose: exp(x) without subtracting the row's max. Right for small values; past about 88
exp overflows float32 to inf, and inf / inf is NaN (the grader's "large values" case)."""

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x)  # overflows to inf for x > 88.7
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x, out):
    n_rows, n_cols = x.shape
    softmax_kernel[(n_rows,)](
        x, out, n_rows, n_cols, x.stride(0), out.stride(0), BLOCK_N=triton.next_power_of_2(n_cols)
    )
    return out
