"""Wrong on purpose: right values, but a plain @triton.jit kernel with a fixed block: nothing is tuned."""

import triton
import triton.language as tl


@triton.jit
def axpy_kernel(
    x_ptr,  # pointer to x
    y_ptr,  # pointer to y
    out_ptr,  # pointer to the output
    alpha,  # the scale, a float scalar
    n_elements,  # length of x, y and out
    size_class,  # computed and passed, but no autotuner reads it
    BLOCK_SIZE: tl.constexpr,  # elements per program: fixed at 1024 by the launcher
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (alpha * x + y).to(out_ptr.dtype.element_ty), mask=mask)


def autotuned_axpy(alpha, x, y, out):
    """out[:] = alpha * x + y. Returns out."""
    n_elements = out.numel()
    size_class = triton.next_power_of_2(n_elements)
    grid = (triton.cdiv(n_elements, 1024),)
    axpy_kernel[grid](x, y, out, alpha, n_elements, size_class, BLOCK_SIZE=1024)
    return out
