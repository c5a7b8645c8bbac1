"""Hostile (found by a red-team review): dataclasses writes the code of __init__ and __eq__ from
the field names and runs it; a class made with type() can have a field named with code in it.
Refused: type() with three arguments."""

import dataclasses

import triton
import triton.language as tl

Injected = dataclasses.dataclass(init=False, repr=False)(
    type(
        "Injected",
        (),
        {
            "a": 0,
            "__annotations__": {
                "a,exec(\"import os; print('B3 exec ok', os.getuid(), os.listdir('/work/main'))\")": int
            },
        },
    )
)
Injected() == Injected()


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
