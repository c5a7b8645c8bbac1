"""Wrong on purpose: computes once per (shape, dtype) and afterwards copies the remembered result,
whatever the inputs are now."""

import torch
import triton
import triton.language as tl

_remembered = {}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, 1024),)
    key = (tuple(out.shape), out.dtype)
    if key not in _remembered:
        saved = torch.empty_like(out)
        add_kernel[grid](x, y, saved, n_elements, BLOCK_SIZE=1024)
        _remembered[key] = saved
    copy_kernel[grid](_remembered[key], out, n_elements, BLOCK_SIZE=1024)
    return out
