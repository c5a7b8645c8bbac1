"""Wrong on purpose: computes in bfloat16 whatever the input dtype. Every step rounds to 8 bits of
mantissa, so float32 and float16 rows lose most of their precision."""

import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, weight_ptr, bias_ptr, out_ptr, n_cols, stride_x, stride_out, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.bfloat16)
    mean = (tl.sum(x, axis=0) / n_cols).to(tl.bfloat16)
    centred = tl.where(mask, x - mean, 0.0).to(tl.bfloat16)
    var = (tl.sum(centred * centred, axis=0) / n_cols).to(tl.bfloat16)
    rstd = (1.0 / tl.sqrt((var + eps).to(tl.float32))).to(tl.bfloat16)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.bfloat16)
    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.bfloat16)
    y = centred * rstd * weight + bias
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def layernorm(x, weight, bias, eps, out):
    n_rows, n_cols = x.shape
    layernorm_kernel[(n_rows,)](
        x, weight, bias, out, n_cols, x.stride(0), out.stride(0), eps, BLOCK_N=triton.next_power_of_2(n_cols)
    )
    return out
