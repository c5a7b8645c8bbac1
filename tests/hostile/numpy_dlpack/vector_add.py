"""Hostile: numpy computes the answer on the inputs' memory (np.from_dlpack shares it), and a kernel
copies it into out. Stopped by the pre-check (np.from_dlpack); past it, the torch guard refuses the
tensors' __dlpack__ (numpy on tensor data in the launcher is torch compute too)."""

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    answer = torch.from_numpy(np.from_dlpack(x) + np.from_dlpack(y))
    n = out.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](answer, out, n, BLOCK_SIZE=1024)
    return out
