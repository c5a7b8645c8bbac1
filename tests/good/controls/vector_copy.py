"""Honest control: prints from inside the kernel (tl.device_print) and from the launcher."""

import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    if tl.program_id(axis=0) == 0:
        tl.device_print("first block", offsets)
    tl.store(out_ptr + offsets, x, mask=mask)


def vector_copy(x, out):
    n = out.numel()
    print("copying", n, "elements")
    copy_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK_SIZE=4096)
    return out
