"""Wrong on purpose: launches a kernel that does nothing and returns the tensor it returned the first
time; the output it was given is never written."""

import triton
import triton.language as tl

_first = []


@triton.jit
def noop_kernel(x_ptr):
    pass


def vector_add(x, y, out):
    noop_kernel[(1,)](x)
    if not _first:
        _first.append(out)
    return _first[0]
