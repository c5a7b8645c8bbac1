"""Wrong on purpose: masked-off columns load as 0.0 instead of -inf. Each padding lane then adds
exp(0 - max) to the row's sum, so rows whose length is no power of two come out too small."""

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)  # should be -inf
    numerator = tl.exp(x - tl.max(x, axis=0))
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x, out):
    n_rows, n_cols = x.shape
    softmax_kernel[(n_rows,)](
        x, out, n_rows, n_cols, x.stride(0), out.stride(0), BLOCK_N=triton.next_power_of_2(n_cols)
    )
    return out
