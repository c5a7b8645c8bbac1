"""Wrong on purpose: divides the sum by a zero it meant to be a norm, so every element is +-inf."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    norm = tl.sum(tl.zeros([BLOCK_SIZE], dtype=tl.float32), axis=0)  # 0: meant to be a real norm
    tl.store(out_ptr + offsets, total / norm, mask=mask)


def vector_add(x, y, out):
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, 1024),)](x, y, out, n_elements, BLOCK_SIZE=1024)
    return out
