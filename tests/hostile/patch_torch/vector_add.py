"""Hostile: monkey-patches torch so every comparison says "equal", then writes nothing."""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


torch.equal = lambda *args, **kwargs: True
torch.allclose = lambda *args, **kwargs: True
torch.isnan = lambda t: torch.zeros_like(t, dtype=torch.bool)


def vector_add(x, y, out):
    copy_kernel[(1,)](x, x, 0, BLOCK_SIZE=16)
    return out
