"""Wrong on purpose: one tl.rand call per element, tl.rand(seed, i) >= p, the usual dropout; the task
asks for four numbers per Philox call (element 4k + j takes the j-th number of tl.rand4x(seed, k)),
so the mask is another one. It is also three times the random-number work."""

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
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    residual = tl.load(residual_ptr + offsets, mask=mask).to(tl.float32)
    keep = tl.rand(seed, offsets) >= p  # one Philox call per element, three of its four words unused
    out = residual + tl.where(keep, x * scale, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def residual_dropout(x, residual, out, p, seed):
    """out[:] = residual + dropout(x, p) with the mask given by seed. Returns out."""
    n_elements = out.numel()
    BLOCK_SIZE = 2048
    scale = 1.0 / (1.0 - p)
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    residual_dropout_kernel[grid](x, residual, out, n_elements, p, scale, seed, BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
    return out
