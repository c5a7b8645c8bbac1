# Exercise file for task `grouped_matmul`: generated from solutions/grouped_matmul.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check grouped_matmul`. Your edits are never overwritten by sync-exercises.
"""out = a @ b with the programs numbered in groups of GROUP_M tile-rows, and autotuned tiles.

A GPU starts programs roughly in the order of their numbers, a wave of one or two per SM at a time.
Numbered row by row, one wave covers parts of a few rows of output tiles and every column-tile: on
an H200 (132 SMs), a wave of 132 programs of 128 x 128 tiles of an 8192 x 8192 output spans three
tile-rows (five at two programs per SM), so it reads three strips of a but every strip of b, and b
streams through the L2 again every few rows of tiles. Numbered in groups, a wave covers a block of
GROUP_M tile-rows by a few tile-columns, and programs that run together read the same strips of a
and of b.

The autotuned kernel keeps the name grouped_matmul_kernel: notebook 06 and the tests read
grouped_matmul_kernel.configs.
"""

import triton
import triton.language as tl


@triton.jit
def grouped_matmul_kernel(
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
    GROUP_M: tl.constexpr,  # tile-rows per group
):
    pid = tl.program_id(axis=0)
    n_row_tiles = tl.cdiv(M, BLOCK_M)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    # TODO: map pid to (pid_m, pid_n) in groups: the first GROUP_M * n_col_tiles programs cover
    # TODO: tile-rows 0 .. GROUP_M - 1 only, going down the group's tile-rows first, then to the next
    # TODO: tile-column; the last group may have fewer than GROUP_M tile-rows.
    tl.static_assert(False, "not implemented yet: grouped_matmul_kernel in exercises/grouped_matmul.py")
    # TODO: the tile itself, as in tiled_matmul: a float32 accumulator over K in steps of BLOCK_K,
    # TODO: masked loads, tl.dot, and a masked store in out's dtype.
    tl.static_assert(False, "not implemented yet: grouped_matmul_kernel in exercises/grouped_matmul.py")


# TODO: wrap the kernel in triton.autotune: a short list of triton.Config({"BLOCK_M": ..., "BLOCK_N": ...,
# TODO: "BLOCK_K": ..., "GROUP_M": ...}, num_warps=..., num_stages=...) and a key on the shape. Keep
# TODO: the name: grouped_matmul_kernel = triton.autotune(...)(grouped_matmul_kernel) (notebook 06
# TODO: and the tests read grouped_matmul_kernel.configs).
raise NotImplementedError("not implemented yet: the module-level code in exercises/grouped_matmul.py")


def grouped_matmul(a, b, out):
    """out[:] = a @ b for a of shape (M, K) and b of shape (K, N), views of any strides. Returns out."""
    M, K = a.shape
    N = b.shape[1]
    # TODO: a 1-D grid of one program per output tile that follows the chosen config
    # TODO: (lambda meta: ...), and the launch with every tensor's two strides.
    raise NotImplementedError("not implemented yet: grouped_matmul in exercises/grouped_matmul.py")
    return out
