"""Correct, and slow on purpose: one launch per 128-element chunk (782 launches in the largest CPU-mode
case). Found by a red-team review to be turned away once ("the task file changed" the report, whose
list of launches had a limit): an honest launcher may launch as often as it likes."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, start, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    n_elements = out.numel()
    for start in range(0, n_elements, 128):
        add_kernel[(1,)](x, y, out, start, n_elements, BLOCK_SIZE=128)
    return out
