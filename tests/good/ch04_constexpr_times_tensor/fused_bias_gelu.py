"""out = GELU(x + bias): each program owns BLOCK_M rows and walks their columns in chunks of BLOCK_N.
tanh form as u * sigmoid(2v) (no cancellation); erf form with tl.math.erf. Flag from a constexpr int."""

import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)


@triton.jit
def _gelu(u, FORM: tl.constexpr):
    if FORM == 1:
        return u * tl.sigmoid(2.0 * SQRT_2_OVER_PI * (u + 0.044715 * u * u * u))
    else:
        return u * 0.5 * (1.0 + tl.math.erf(u / 1.4142135623730951))


@triton.jit
def bias_gelu_kernel(
    x_ptr,
    bias_ptr,
    out_ptr,
    n_rows,
    n_cols,
    stride_x,
    stride_out,
    FORM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    x_rows = x_ptr + rows.to(tl.int64)[:, None] * stride_x
    o_rows = out_ptr + rows.to(tl.int64)[:, None] * stride_out
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_ok = cols < n_cols
        m = row_ok[:, None] & col_ok[None, :]
        bias = tl.load(bias_ptr + cols, mask=col_ok).to(tl.float32)
        u = tl.load(x_rows + cols[None, :], mask=m).to(tl.float32) + bias[None, :]
        tl.store(o_rows + cols[None, :], _gelu(u, FORM).to(out_ptr.dtype.element_ty), mask=m)


def fused_bias_gelu(x, bias, out, approximate="tanh"):
    """out[:] = gelu(x + bias, approximate) for x of shape (n_rows, n_cols). Returns out."""
    n_rows, n_cols = x.shape
    BLOCK_M = 4
    BLOCK_N = min(512, triton.next_power_of_2(n_cols))
    form = {"tanh": 1, "none": 0}[approximate]
    bias_gelu_kernel[(triton.cdiv(n_rows, BLOCK_M),)](
        x, bias, out, n_rows, n_cols, x.stride(0), out.stride(0), FORM=form, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N
    )
    return out
