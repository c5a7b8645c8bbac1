"""WRONG (found by a helper writing right alternatives): the alignment is provable, since the launcher passes
the row strides and the row length in units of VEC elements and the kernel multiplies by the constexpr VEC,
but BLOCK_SIZE 512 over 4 warps (128 threads) gives each thread 4 fp16 elements: 8-byte accesses, not 16.
The grader's reason must be the elements per thread, not a missing hint."""

import triton
import triton.language as tl


@triton.jit
def scale_rows_kernel(
    x_ptr, scale_ptr, out_ptr, n_vecs, stride_x_vecs, stride_out_vecs, BLOCK_SIZE: tl.constexpr, VEC: tl.constexpr
):
    row = tl.program_id(0)
    col_block = tl.program_id(1)
    x_row = x_ptr + row * (stride_x_vecs * VEC)
    out_row = out_ptr + row * (stride_out_vecs * VEC)
    cols = col_block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_vecs * VEC
    s = tl.load(scale_ptr + row).to(tl.float32)
    x = tl.load(x_row + cols, mask=mask, other=0.0)
    tl.store(out_row + cols, (x.to(tl.float32) * s).to(out_ptr.dtype.element_ty), mask=mask)


def scale_rows(x, scale, out):
    """out[i, :] = x[i, :] * scale[i]. Returns out."""
    R, C = x.shape
    vec = 16 // x.element_size()
    ok = (
        x.data_ptr() % 16 == 0
        and out.data_ptr() % 16 == 0
        and x.stride(0) % vec == 0
        and out.stride(0) % vec == 0
        and C % vec == 0
    )
    if not ok:
        vec = 1
    BLOCK_SIZE = 512
    scale_rows_kernel[(R, triton.cdiv(C, BLOCK_SIZE))](
        x, scale, out, C // vec, x.stride(0) // vec, out.stride(0) // vec, BLOCK_SIZE=BLOCK_SIZE, VEC=vec, num_warps=4
    )
    return out
