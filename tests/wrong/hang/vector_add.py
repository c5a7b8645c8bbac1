"""Wrong on purpose: the kernel loops forever (a loop whose condition never changes)."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    i = 0
    while i < n_elements:
        i = i * 1
    offsets = tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets), mask=offsets < n_elements)


def vector_add(x, y, out):
    add_kernel[(1,)](x, y, out, out.numel(), BLOCK_SIZE=1024)
    return out
