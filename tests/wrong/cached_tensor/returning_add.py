"""Wrong on purpose (test-only task `returning_add`): computes once per (shape, dtype), then launches
a kernel that does nothing and returns the remembered tensor."""

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
def noop_kernel(x_ptr):
    pass


def returning_add(x, y):
    key = (tuple(x.shape), x.dtype)
    if key in _remembered:
        noop_kernel[(1,)](x)
        return _remembered[key]
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    _remembered[key] = out
    return out
