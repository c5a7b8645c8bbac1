"""Correct, written differently from the solution (found by a red-team review, turned away once as
having never read x): x is loaded only where the element is kept, which saves the bytes of the
dropped ones. Dropout's x may be read in part (TaskSpec.partly_read)."""

import triton
import triton.language as tl


@triton.jit
def residual_dropout_kernel(
    x_ptr,  # the values that go through dropout
    residual_ptr,  # added as they are
    out_ptr,
    n_elements,
    p,  # probability of dropping an element, 0 <= p < 1
    scale,  # 1 / (1 - p), divided once on the host: a multiply per element, not a division
    seed,  # with the element's index, decides its fate
    BLOCK_SIZE: tl.constexpr,
):
    block_start = tl.program_id(axis=0).to(tl.int64) * BLOCK_SIZE  # int64: pid * BLOCK_SIZE passes 2**31
    k = block_start // 4 + tl.arange(0, BLOCK_SIZE // 4)  # one Philox counter per 4 elements
    j = tl.arange(0, 4)
    offsets = k[:, None] * 4 + j[None, :]  # (BLOCK_SIZE // 4, 4), contiguous in memory
    mask = offsets < n_elements
    residual = tl.load(residual_ptr + offsets, mask=mask).to(tl.float32)
    r0, r1, r2, r3 = tl.rand4x(seed, k)  # counter-based: depends on (seed, k) only
    r = tl.where(j == 0, r0[:, None], tl.where(j == 1, r1[:, None], tl.where(j == 2, r2[:, None], r3[:, None])))
    keep = r >= p
    x = tl.load(x_ptr + offsets, mask=mask & keep, other=0.0).to(tl.float32)
    out = residual + tl.where(keep, x * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def residual_dropout(x, residual, out, p, seed):
    """out[:] = residual + dropout(x, p) with the mask given by seed. Returns out."""
    n_elements = out.numel()
    BLOCK_SIZE = 2048  # a multiple of 4; with 4 warps the fastest of six in bf16 on an H200, within 1% in fp32
    scale = 1.0 / (1.0 - p)  # once per call; the kernel multiplies by it
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    residual_dropout_kernel[grid](x, residual, out, n_elements, p, scale, seed, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
