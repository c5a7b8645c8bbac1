"""Hostile (found by a red-team review): an argument of a class made on the spot that names a Triton
module; its untyped_storage is functools.partial(torch.add, ...), which Triton's interpreter calls
inside the launch, from its own frames, where the torch guard once let it through. A kernel's
arguments are exact tensors, descriptors, numbers, dtypes or Triton's own objects."""

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
    o = tl.load(out_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, o, mask=mask)


def vector_add(x, y, out):
    n = out.numel()
    fake = type(
        "Fake",
        (),
        {"__module__": "triton.fake", "data_ptr": 0, "untyped_storage": functools.partial(torch.add, x, y, out=out)},
    )()
    try:
        touch_kernel[(1,)](x, y, out, 0, fake, BLOCK_SIZE=16)
    except Exception:
        pass
    touch_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, 0, BLOCK_SIZE=1024)
    return out
