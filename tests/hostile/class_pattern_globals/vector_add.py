"""Hostile (found by a red-team review): a class made with type() from a dict of strings, whose
metaclass says every object is an instance and whose __match_args__ names __globals__; a positional
class pattern then reads a function's globals, and from them exec. Refused: type() with three
arguments, and class patterns with sub-patterns on a class of the file's own."""

import torch
import triton
import triton.language as tl

Yes = type("Yes", (type,), {"__instancecheck__": lambda cls, obj: True})
Globals = Yes("Globals", (), {"__match_args__": ("__globals__",)})


def grab(f):
    match f:
        case Globals(g):
            return g


B = grab(grab)["__builtins__"]
B["exec"]("import os; print('B1 exec ok, uid', os.getuid(), 'ls /', sorted(os.listdir('/')))")


@triton.jit
def touch_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


ns = {}
B["exec"]("import torch\ndef add(x, y, out):\n    with torch._C.DisableTorchFunction():\n        out.copy_(x + y)", ns)
_add = ns["add"]


def vector_add(x, y, out):
    n = out.numel()
    _add(x, y, out)
    touch_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
