"""out = alpha * x + y for any length, from pointers that need not be aligned."""

import triton
import triton.language as tl


@triton.jit
def scaled_add_kernel(
    x_ptr,  # pointer to x (may start anywhere, e.g. x[1:])
    y_ptr,  # pointer to y
    out_ptr,  # pointer to the output
    alpha,  # the scale, a float scalar
    n_elements,  # length of x, y and out
    BLOCK_SIZE: tl.constexpr,  # elements per program
):
    # BEGIN SOLUTION
    # TODO: as in vector_add, but compute alpha * x + y in float32 and store it in out's dtype.
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    result = alpha * x + y
    tl.store(out_ptr + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


def scaled_add(alpha, x, y, out):
    """out[:] = alpha * x + y. Returns out."""
    # BEGIN SOLUTION
    # TODO: launch scaled_add_kernel over enough programs to cover every element.
    n_elements = out.numel()
    BLOCK_SIZE = 1024
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    scaled_add_kernel[grid](x, y, out, alpha, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    # END SOLUTION
    return out
