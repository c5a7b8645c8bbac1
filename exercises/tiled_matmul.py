# Exercise file for task `tiled_matmul`: generated from solutions/tiled_matmul.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check tiled_matmul`. Your edits are never overwritten by sync-exercises.
"""out = a @ b, one BLOCK_M x BLOCK_N tile of out per program, K walked BLOCK_K at a time.

Each program keeps its tile of the product in a float32 accumulator, adds one tl.dot of a
(BLOCK_M, BLOCK_K) slice of a and a (BLOCK_K, BLOCK_N) slice of b per step, and stores the tile once,
cast to out's dtype. Strides are passed for every tensor, so views (b.t(), rows of a wider matrix)
work as they are, without a copy.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr,  # a, (M, K): element (m, k) at a_ptr + m * stride_am + k * stride_ak
    b_ptr,  # b, (K, N): element (k, n) at b_ptr + k * stride_bk + n * stride_bn
    out_ptr,  # out, (M, N): element (m, n) at out_ptr + m * stride_om + n * stride_on
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,  # rows of out per program
    BLOCK_N: tl.constexpr,  # columns of out per program
    BLOCK_K: tl.constexpr,  # depth of one tl.dot step
):
    # TODO: find this program's tile (pid_m, pid_n) from its number (consecutive programs walk along
    # TODO: a row of tiles); loop over K in steps of BLOCK_K, loading a (BLOCK_M, BLOCK_K) slice of a
    # TODO: and a (BLOCK_K, BLOCK_N) slice of b with masks, and add tl.dot of them into a float32
    # TODO: accumulator; store the tile in out's dtype, masked to the M x N edge.
    tl.static_assert(False, "not implemented yet: matmul_kernel in exercises/tiled_matmul.py")


def tiled_matmul(a, b, out):
    """out[:] = a @ b for a of shape (M, K) and b of shape (K, N), views of any strides. Returns out."""
    M, K = a.shape
    N = b.shape[1]
    # TODO: pick BLOCK_M, BLOCK_N, BLOCK_K (powers of two, at least 16 for tl.dot), launch one
    # TODO: program per output tile on a 1-D grid, and pass every tensor's two strides. Take a smaller
    # TODO: tile for float32 inputs: num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 4 bytes of slices must
    # TODO: fit in the 227 KB of shared memory one program may have on Hopper.
    raise NotImplementedError("not implemented yet: tiled_matmul in exercises/tiled_matmul.py")
    return out
