"""Hostile: the launcher leaves the tensors in a module-level list, and the kernel body, which the
interpreter runs as Python, computes with torch on them, then loads every input and stores out back
onto itself. A torch call made by the learner's code inside a launch is still launcher code: the
torch guard stops it."""

import torch
import triton
import triton.language as tl

STASH = []


@triton.jit
def touch_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    if len(STASH) == 3:
        torch.add(STASH[0], STASH[1], out=STASH[2])
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    seen = tl.load(x_ptr + offsets, mask=mask) * 0 + tl.load(y_ptr + offsets, mask=mask) * 0
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask) + seen, mask=mask)


def vector_add(x, y, out):
    STASH[:] = [x, y, out]
    n = out.numel()
    touch_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
