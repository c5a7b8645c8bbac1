"""Hostile: computes with torch.ops.aten (no torch function handling there) and copies the result
with a kernel."""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    answer = torch.ops.aten.add.Tensor(x, y)
    n = out.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](answer, out, n, BLOCK_SIZE=1024)
    return out
