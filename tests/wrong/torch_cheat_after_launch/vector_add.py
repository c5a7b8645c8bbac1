"""Wrong on purpose: a kernel copies x, then torch adds y in the launcher."""

import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    n_elements = out.numel()
    copy_kernel[(triton.cdiv(n_elements, 1024),)](x, out, n_elements, BLOCK_SIZE=1024)
    out += y
    return out
