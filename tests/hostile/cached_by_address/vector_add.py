"""Hostile (found by a red-team review, on a GPU): a correct kernel, and a launcher that skips the work
when it sees the same large tensors again, which is what timing does: speed points for a kernel that
does nothing while it is timed. After timing, the grader puts new values in the same tensors and calls
once more: the output must be right. (Its cases are small, and pass: only the GPU's timing shows it.)"""

import triton
import triton.language as tl

SEEN = set()


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    n = out.numel()
    key = (x.data_ptr(), y.data_ptr(), out.data_ptr(), n)
    if n >= 1 << 24 and key in SEEN:
        return out
    SEEN.add(key)
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
