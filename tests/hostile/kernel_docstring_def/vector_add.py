"""Hostile (found by a red-team review): code inside a string in a kernel's body. Triton's
interpreter re-reads the kernel's source and starts it at the LAST line that begins with "def ",
which here is inside the string: the pre-check saw a string, the interpreter ran the code. Refused:
a line inside a kernel may not start with `def `."""

import triton
import triton.language as tl

TENSORS = []


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    """
    def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        import os
        import torch
        print("B4: kernel body runs unchecked code, pid", os.getpid(), "open:", open("/proc/self/status").readline().strip())
        if tl.program_id(axis=0) == 0:
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


def vector_add(x, y, out):
    n = out.numel()
    TENSORS.append((x, y, out))
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
