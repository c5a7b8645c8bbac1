"""Hostile: writes the answer through the output's raw pointer with ctypes (no kernel computes it)."""

import ctypes

import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    answer = [a + b for a, b in zip(x.tolist(), y.tolist())]
    buffer = (ctypes.c_float * len(answer))(*answer)
    ctypes.memmove(out.data_ptr(), buffer, 4 * len(answer))
    copy_kernel[(1,)](x, x, 0, BLOCK_SIZE=16)
    return out
