# Exercise file for task `scale_rows`: generated from solutions/scale_rows.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check scale_rows`. Your edits are never overwritten by sync-exercises.
"""out[i, :] = x[i, :] * scale[i], read and written 16 bytes at a time where the rows allow it.

x and out are (R, C) views whose rows may lie further apart than C (padded to a multiple of 16
bytes). Triton specializes an integer argument as "divisible by 16" only when it is a multiple of
16 elements, so it cannot see that rows 1016 fp16 apart (2032 bytes) start on 16-byte boundaries.
The launcher can: it checks the addresses and strides and passes VEC, the elements per 16 bytes
(or 1), and the kernel tells the compiler with tl.multiple_of.
"""

import triton
import triton.language as tl


@triton.jit
def scale_rows_kernel(
    x_ptr,  # x, (R, C): element (i, j) at x_ptr + i * stride_x + j
    scale_ptr,  # scale, (R,)
    out_ptr,  # out, (R, C): element (i, j) at out_ptr + i * stride_out + j
    n_cols,  # C
    stride_x,  # elements between rows of x
    stride_out,  # elements between rows of out
    BLOCK_SIZE: tl.constexpr,  # columns per program
    VEC: tl.constexpr,  # the launcher's promise: row starts and n_cols are multiples of VEC elements
):
    row = tl.program_id(axis=0)
    col_block = tl.program_id(axis=1)
    # TODO: this program's columns and their mask; the row's start in x and in out, hinted as
    # TODO: multiples of VEC (tl.multiple_of on the product row * stride: a hint on a bare argument
    # TODO: is dropped); the mask kept in whole vectors of VEC; load, multiply by scale[row], store.
    tl.static_assert(False, "not implemented yet: scale_rows_kernel in exercises/scale_rows.py")


def scale_rows(x, scale, out):
    """out[i, :] = x[i, :] * scale[i] for x and out of shape (R, C) with unit column stride. Returns out."""
    n_rows, n_cols = x.shape
    # TODO: decide VEC = 16 // x.element_size() only if both base addresses are multiples of 16 bytes
    # TODO: and both row strides and n_cols are multiples of that many elements, else 1; launch a
    # TODO: (n_rows, cdiv(n_cols, BLOCK_SIZE)) grid with the strides and VEC.
    raise NotImplementedError("not implemented yet: scale_rows in exercises/scale_rows.py")
    return out
