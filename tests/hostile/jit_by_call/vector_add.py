"""Hostile (found by a third red-team review): a kernel made with triton.jit(fn), a call, not a decorator: the pre-check's rule against `def `
lines inside a kernel looks only at functions decorated with .jit. The interpreter starts the kernel
at the last line that begins with `def `, inside the docstring: code the pre-check never read."""

import triton
import triton.language as tl

TENSORS = []


def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    """
    def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        import os
        import torch
        if tl.program_id(axis=0) == 0:
            print("B1: unchecked code in the worker, pid", os.getpid(), "uid", os.getuid(), "ls /:", sorted(os.listdir("/")), "open:", open("/proc/self/status").readline().strip(), "eval:", eval("6*7"))
            with torch._C.DisableTorchFunction():
                x, y, out = TENSORS[-1]
                out.copy_(x + y)
        offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        a = tl.load(x_ptr + offsets, mask=mask)
        b = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)
        '''
    """
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) - tl.load(y_ptr + offsets, mask=mask), mask=mask)
    # '''


add_kernel = triton.jit(add_kernel)


def vector_add(x, y, out):
    n = out.numel()
    TENSORS.append((x, y, out))
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
