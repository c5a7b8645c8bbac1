"""Hostile (found by a red-team review): a real triton.TensorWrapper around a plain class whose
untyped_storage is functools.partial(torch.add, ...): the interpreter unwraps it inside the launch
and calls it from Triton's own frames. A wrapper must wrap an exact torch.Tensor."""

import functools

import torch
import triton
import triton.language as tl


@triton.jit
def touch_kernel(x_ptr, y_ptr, out_ptr, n_elements, dummy, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    n = out.numel()

    class Base:
        data = 0
        device = "cpu"
        shape = (0,)
        untyped_storage = functools.partial(torch.add, x, y, out=out)

    wrapped = triton.TensorWrapper(Base(), tl.float32)
    wrapped.numel = int
    try:
        touch_kernel[(1,)](x, y, out, 0, wrapped, BLOCK_SIZE=16)
    except Exception:
        pass
    touch_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, 0, BLOCK_SIZE=1024)
    return out
