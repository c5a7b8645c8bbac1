# Exercise file for task `tiled_transpose`: generated from solutions/tiled_transpose.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check tiled_transpose`. Your edits are never overwritten by sync-exercises.
"""out = x.T by square tiles: each program reads a BLOCK x BLOCK tile along x's rows and writes it
along out's rows.

A transpose reads x row by row and writes out column by column, so one of the two walks across
rows: consecutive elements of a column are a whole row apart in memory. A tile fixes that. The
program loads its tile with consecutive lanes on consecutive elements of an x row (coalesced), turns
the tile over in registers with tl.trans, and stores it with consecutive lanes on consecutive
elements of an out row (coalesced again). On a GPU the compiler moves the tile between the two
layouts through shared memory; in the interpreter, tl.trans turns the (BLOCK, BLOCK) block of values
round, so the store's block is row-major in out as well. Strides are passed for both tensors, so
views (x.t(), rows of a wider matrix, a tensor one element into its buffer) work as they are.
"""

import triton
import triton.language as tl


@triton.jit
def transpose_kernel(
    x_ptr,  # x, (M, N): element (m, n) at x_ptr + m * stride_xm + n * stride_xn
    out_ptr,  # out, (N, M): element (n, m) at out_ptr + n * stride_on + m * stride_om
    M,
    N,
    stride_xm,
    stride_xn,
    stride_on,
    stride_om,
    BLOCK: tl.constexpr,  # the tile is BLOCK x BLOCK elements
):
    # TODO: find this program's tile of x (program_id(0) along the rows, program_id(1) along the
    # TODO: columns); load it with x's strides and a mask for the ragged edge; store its transpose
    # TODO: (tl.trans) so that consecutive elements land in consecutive columns of an out row.
    tl.static_assert(False, "not implemented yet: transpose_kernel in exercises/tiled_transpose.py")


def tiled_transpose(x, out):
    """out[:] = x.T for x of shape (M, N) and out of shape (N, M), views of any strides. Returns out."""
    M, N = x.shape
    # TODO: pick BLOCK (a power of two) and num_warps, launch a 2-D grid of
    # TODO: (cdiv(M, BLOCK), cdiv(N, BLOCK)) programs, and pass both tensors' two strides.
    raise NotImplementedError("not implemented yet: tiled_transpose in exercises/tiled_transpose.py")
    return out
