"""A correct layernorm written differently from the course's: the mean and the variance come from one
tl.reduce with a combine function of its own (Welford's: each partial keeps its count, mean and M2,
the sum of squared deviations, and two partials merge exactly). One row per program, one read of x.

In CPU mode Triton's interpreter ran a custom combine function element by element (about 137 s for the
task's cases, past the time limit); course_lib's interpreter runs it over whole halves of the row at a
time, as a tree, and grades it in seconds."""

import triton
import triton.language as tl


@triton.jit
def _welford(count_a, mean_a, m2_a, count_b, mean_b, m2_b):
    count = count_a + count_b
    share = tl.where(count > 0, count_b / tl.maximum(count, 1.0), 0.0)
    delta = mean_b - mean_a
    mean = mean_a + delta * share
    m2 = m2_a + m2_b + delta * delta * count_a * share
    return count, mean, m2


@triton.jit
def welford_layernorm_kernel(x_ptr, weight_ptr, bias_ptr, out_ptr, n_cols, stride_x, stride_out, eps,
                             BLOCK_N: tl.constexpr):  # fmt: skip
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    count = mask.to(tl.float32)  # each element is a partial of one value (padding: of none)
    zero = tl.zeros([BLOCK_N], dtype=tl.float32)
    _, mean, m2 = tl.reduce((count, x, zero), 0, _welford)
    rstd = 1.0 / tl.sqrt(m2 / n_cols + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * weight + bias
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def layernorm(x, weight, bias, eps, out):
    n_rows, n_cols = x.shape
    welford_layernorm_kernel[(n_rows,)](
        x, weight, bias, out, n_cols, x.stride(0), out.stride(0), eps,
        BLOCK_N=triton.next_power_of_2(n_cols), num_warps=8,
    )  # fmt: skip
    return out
