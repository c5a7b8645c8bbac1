"""Wrong on purpose: the kernel ignores `seed` and draws with a constant of its own, so the mask
is not the one the seed asks for (and never changes)."""

import triton
import triton.language as tl


@triton.jit
def residual_dropout_kernel(
    x_ptr,  # the values that go through dropout
    residual_ptr,  # added as they are
    out_ptr,
    n_elements,
    p,  # probability of dropping an element, 0 <= p < 1
    scale,  # 1 / (1 - p), divided once on the host
    seed,  # with the element's index, decides its fate
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    k = pid * (BLOCK_SIZE // 4) + tl.arange(0, BLOCK_SIZE // 4)  # one Philox counter per 4 elements
    j = tl.arange(0, 4)
    offsets = k[:, None] * 4 + j[None, :]  # (BLOCK_SIZE // 4, 4), contiguous in memory
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    residual = tl.load(residual_ptr + offsets, mask=mask).to(tl.float32)
    r0, r1, r2, r3 = tl.rand4x(1234, k)  # a constant instead of the seed
    r = tl.where(j == 0, r0[:, None], tl.where(j == 1, r1[:, None], tl.where(j == 2, r2[:, None], r3[:, None])))
    out = residual + tl.where(r >= p, x * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def residual_dropout(x, residual, out, p, seed):
    """out[:] = residual + dropout(x, p) with the mask given by seed. Returns out."""
    n_elements = out.numel()
    BLOCK_SIZE = 2048  # a multiple of 4; 2048 with 4 warps was the fastest of six on an H200
    scale = 1.0 / (1.0 - p)
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    residual_dropout_kernel[grid](x, residual, out, n_elements, p, scale, seed, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
