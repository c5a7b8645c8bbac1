"""Hostile (chapter 08's tiled_transpose): an uncoalesced transpose (right values, a column of out per
warp) whose structural check's probe is replaced by one that says it ran in GPU mode, where the
coalescing check is left to the GPU. The grader compares the report's mode with its own."""

import triton
import triton.language as tl

import course_lib.tasks.ch08_memory_access as checks

checks.probe_sectors = lambda module, entry: {"mode": "gpu"}


@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_on, stride_om, BLOCK_N: tl.constexpr):
    m = tl.program_id(axis=0)
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        mask = cols < N
        row = tl.load(x_ptr + m * stride_xm + cols * stride_xn, mask=mask)
        tl.store(out_ptr + cols * stride_on + m * stride_om, row, mask=mask)


def tiled_transpose(x, out):
    M, N = x.shape
    transpose_kernel[(M,)](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1), BLOCK_N=256)
    return out
