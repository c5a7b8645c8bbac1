"""Wrong on purpose: x's rows are addressed n_cols elements apart, the row length, instead of stride_x.
Right for contiguous inputs; a view into a wider matrix reads the wrong elements."""

import triton
import triton.language as tl


@triton.jit
def bias_gelu_kernel(
    x_ptr,  # input, (n_rows, n_cols), rows stride_x elements apart, columns contiguous
    bias_ptr,  # bias, (n_cols,)
    out_ptr,  # output, (n_rows, n_cols), rows stride_out elements apart
    n_rows,
    n_cols,
    stride_x,
    stride_out,
    TANH: tl.constexpr,  # True: the tanh approximation; False: the exact erf form
    BLOCK_M: tl.constexpr,  # rows per program
    BLOCK_N: tl.constexpr,  # columns per program
):
    pid = tl.program_id(axis=0)
    col_tiles = tl.cdiv(n_cols, BLOCK_N)
    pid_m = pid // col_tiles
    pid_n = pid % col_tiles
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    mask = (rows[:, None] < n_rows) & col_mask[None, :]
    rows64 = rows.to(tl.int64)  # rows * stride passes 2**31 on tensors of 2 GiB and more
    x = tl.load(x_ptr + rows64[:, None] * n_cols + cols[None, :], mask=mask).to(tl.float32)  # row length, not stride
    bias = tl.load(bias_ptr + cols, mask=col_mask).to(tl.float32)  # once per tile, not per row
    u = x + bias[None, :]
    if TANH:
        # 0.5 * u * (1 + tanh(v)) = u * sigmoid(2v), with v = sqrt(2/pi) * (u + 0.044715 u^3): no
        # 1 + tanh cancellation for negative u. 1 / d is rsqrt(d)^2: the hardware's one-instruction
        # reciprocal square root and a multiply, where a division (even tl.fdiv) adds range checks.
        z = 2.302208198 * u * (1.0 + 0.044715 * u * u)  # 2v log2(e): exp(-2v) = 2^-z
        r = tl.math.rsqrt(1.0 + tl.exp2(-z))  # rsqrt(inf) = 0: u * 0 = 0 for large negative u
        y = u * (r * r)
    else:
        # u * Phi(u) with Phi(-|u|) = t * P(t) * exp(-u^2 / 2), t = 1 / (1 + 0.3275911 |u| / sqrt 2):
        # Abramowitz & Stegun 7.1.26, erf to 1.5e-7, coefficients halved for Phi. One reciprocal
        # (rsqrt squared, as above), one exp2, no branch: in bfloat16 the kernel is limited by its
        # instructions, not its bytes, and tl.math.erf's longer code runs far slower.
        a = tl.abs(u)
        r = tl.math.rsqrt(1.0 + 0.2316419 * a)
        t = r * r
        q = t * (0.127414796 + t * (-0.142248368 + t * (0.7107068705 + t * (-0.7265760135 + t * 0.5307027145))))
        q = q * tl.exp2(u * u * -0.7213475204444817)  # exp(-u^2 / 2) = 2^(-u^2 log2(e) / 2)
        y = tl.maximum(u, 0.0) - a * q  # u * (1 - q) for u >= 0, u * q below zero
    tl.store(out_ptr + rows64[:, None] * stride_out + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def fused_bias_gelu(x, bias, out, approximate="tanh"):
    """out[:] = gelu(x + bias, approximate) for x of shape (n_rows, n_cols). Returns out."""
    n_rows, n_cols = x.shape
    # Tiles of 4096 elements, each thread moving 32 bytes: 2 x 2048 with 8 warps for 2-byte
    # elements, 4 x 1024 with 16 warps for 4-byte ones. Programs are numbered along the rows, so
    # programs that run at the same time read neighbouring addresses: 5% faster in float32 than
    # numbering down the columns, on an H200 (results/experiment_gelu_h200.json).
    BLOCK_N = min(triton.next_power_of_2(n_cols), 2048 if x.element_size() <= 2 else 1024)
    BLOCK_M = min(triton.next_power_of_2(n_rows), max(1, 4096 // BLOCK_N))
    num_warps = 8 if x.element_size() <= 2 else 16
    grid = (triton.cdiv(n_rows, BLOCK_M) * triton.cdiv(n_cols, BLOCK_N),)
    bias_gelu_kernel[grid](
        x, bias, out, n_rows, n_cols, x.stride(0), out.stride(0),
        TANH=approximate == "tanh", BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps,
    )  # fmt: skip
    return out
