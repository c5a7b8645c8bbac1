"""Found by a fifth red-team review (the same trick as probe_shape_split, for the sector count): every
case runs the naive transpose (a row of x stored down a column of out: 32 sectors a warp), and at the
probe's shape, 256 x 192, a copy that is coalesced both ways and does not transpose at all. The sectors
are counted on that run only, so its result must be right."""

import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_on, stride_om, BLOCK_N: tl.constexpr):
    m = tl.program_id(axis=0)
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        mask = cols < N
        row = tl.load(x_ptr + m * stride_xm + cols * stride_xn, mask=mask)
        tl.store(out_ptr + cols * stride_on + m * stride_om, row, mask=mask)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def tiled_transpose(x, out):
    M, N = x.shape
    if (M, N) == (256, 192) and x.is_contiguous() and out.is_contiguous():
        copy_kernel[(triton.cdiv(M * N, 1024),)](x, out, M * N, BLOCK=1024)
        return out
    transpose_kernel[(M,)](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1), BLOCK_N=256)
    return out
