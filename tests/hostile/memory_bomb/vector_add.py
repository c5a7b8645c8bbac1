"""Hostile: asks for 32 GiB of host memory in the launcher (the worker's memory limit stops it)."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    hoard = torch.ones(2**33, dtype=torch.float32)  # 32 GiB, touched page by page
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, hoard, n, BLOCK_SIZE=1024)
    return out
