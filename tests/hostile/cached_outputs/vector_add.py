"""Hostile: computes each shape once, then answers every later call of that shape from a cache."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


_seen = {}


def vector_add(x, y, out):
    key = (tuple(out.shape), out.dtype)
    if key in _seen:
        add_kernel[(1,)](_seen[key][0], _seen[key][1], out, 0, BLOCK_SIZE=16)  # stores nothing
        return out
    _seen[key] = (x, y)
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
