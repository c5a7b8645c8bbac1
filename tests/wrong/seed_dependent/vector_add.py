"""Wrong on purpose, but only for some inputs: where x > 1 it stores x instead of x + y. Whether the
tiny cases fail depends on the random inputs, so the first failing case depends on the seed."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 1.0, x, x + y), mask=mask)


def vector_add(x, y, out):
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, 1024),)](x, y, out, n_elements, BLOCK_SIZE=1024)
    return out
