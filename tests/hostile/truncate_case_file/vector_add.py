"""Hostile: cuts its case's shared file to nothing (every descriptor the process holds is truncated),
which once killed the grader with SIGBUS when it read the outputs back. The grader reads the file into
its own memory with a size check: the learner's failure."""

import os

import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    for name in os.listdir("/proc/self/fd"):
        try:
            os.ftruncate(int(name), 0)
        except OSError:
            pass
    return out
