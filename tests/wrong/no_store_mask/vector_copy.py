"""Wrong on purpose: the load is masked (as given) but the learner's store is not."""

import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x)


def vector_copy(x, out):
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, 1024),)
    copy_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024)
    return out
