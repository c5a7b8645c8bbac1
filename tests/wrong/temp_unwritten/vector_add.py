"""Wrong on purpose: the sum goes through a scratch buffer from torch.empty_like whose odd elements
are never written; the copy then carries whatever the scratch held into the output."""

import torch
import triton
import triton.language as tl


@triton.jit
def even_add_kernel(x_ptr, y_ptr, tmp_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(tmp_ptr + offsets, total, mask=mask & (offsets % 2 == 0))


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, 1024),)
    tmp = torch.empty_like(out)
    even_add_kernel[grid](x, y, tmp, n_elements, BLOCK_SIZE=1024)
    copy_kernel[grid](tmp, out, n_elements, BLOCK_SIZE=1024)
    return out
