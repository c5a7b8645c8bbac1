"""Wrong on purpose: the comparison is inverted: elements are kept where tl.rand(seed, i) < p, so a
fraction p is kept instead of 1 - p."""

import triton
import triton.language as tl


@triton.jit
def residual_dropout_kernel(
    x_ptr,  # the values that go through dropout
    residual_ptr,  # added as they are
    out_ptr,
    n_elements,
    p,  # probability of dropping an element, 0 <= p < 1
    seed,  # with the element's index, decides its fate
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    residual = tl.load(residual_ptr + offsets, mask=mask).to(tl.float32)
    keep = tl.rand(seed, offsets) < p  # inverted: keeps a fraction p
    out = residual + tl.where(keep, x / (1.0 - p), 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def residual_dropout(x, residual, out, p, seed):
    """out[:] = residual + dropout(x, p) with the mask given by seed. Returns out."""
    n_elements = out.numel()
    BLOCK_SIZE = 2048
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    residual_dropout_kernel[grid](x, residual, out, n_elements, p, seed, BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
    return out
