"""Hostile: replaces the grader's comparison from module code, then writes nothing. If the
comparison ran in this process, every task would pass."""

import triton
import triton.language as tl

import course_lib.compare
import course_lib.grader.cases


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


course_lib.compare.compare = lambda *args, **kwargs: None
course_lib.grader.cases.judge = lambda *args, **kwargs: None


def vector_add(x, y, out):
    copy_kernel[(1,)](x, x, 0, BLOCK_SIZE=16)  # launches a kernel that stores nothing
    return out
