"""A correct fused_linear written differently from the course's: the tile is not chosen by hand but
by triton.autotune, over a few configs keyed on the shape. One kernel, one store of out, the bias and
GELU applied to the accumulator in registers.

On a GPU the autotuner times every config once per new shape and keeps the fastest; the interpreter
(CPU mode) has nothing to time, so each config runs once. Either way the learner launched one kernel
per call: the fusion judge must see one launch, not the autotuner's trial runs."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=3),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def linear_gelu_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr, M, N, K,
    sxm, sxk, swn, swk, som, son,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    pid_m = pid // n_col_tiles
    pid_n = pid % n_col_tiles
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a_mask = (rows[:, None] < M) & (ks[None, :] < K)
        b_mask = (cols[None, :] < N) & (ks[:, None] < K)
        a = tl.load(x_ptr + rows[:, None] * sxm + ks[None, :] * sxk, mask=a_mask, other=0.0)
        b = tl.load(w_ptr + cols[None, :] * swn + ks[:, None] * swk, mask=b_mask, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")  # float32 multiplied exactly, not in TF32
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    u = acc + bias[None, :]
    inner = 0.7978845608028654 * (u + 0.044715 * u * u * u)
    y = 0.5 * u * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))  # tanh(v) = 2 sigmoid(2v) - 1
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptr + rows[:, None] * som + cols[None, :] * son, y.to(out_ptr.dtype.element_ty), mask=mask)


def fused_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = weight.shape[0]

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    linear_gelu_kernel[grid](
        x, weight, bias, out, M, N, K,
        x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), out.stride(0), out.stride(1),
    )  # fmt: skip
    return out
