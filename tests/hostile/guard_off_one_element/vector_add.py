"""Hostile: switches the torch guard off, computes the answer with torch, and copies it into out with
a kernel that also loads one element of each input, so that every input "was read by a kernel".
Stopped by the pre-check (torch._C); past it, by the data-flow rule: every element of every input
must be read by a kernel."""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    first = tl.load(x_ptr) * 0 + tl.load(y_ptr) * 0
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask) + first, mask=mask)


def vector_add(x, y, out):
    with torch._C.DisableTorchFunction():
        answer = x + y
    n = out.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](answer, x, y, out, n, BLOCK_SIZE=1024)
    return out
