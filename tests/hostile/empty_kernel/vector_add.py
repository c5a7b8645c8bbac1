"""Hostile: launches a kernel that does nothing."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass


def vector_add(x, y, out):
    add_kernel[(1,)](x, y, out, out.numel(), BLOCK_SIZE=16)
    return out
