"""Wrong on purpose: right values and the row starts hinted, but the mask is cols < n_cols, which the
compiler cannot see in whole vectors of VEC: the padded rows are still read 2 bytes at a time."""

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
    x_start = tl.multiple_of(row * stride_x, VEC)
    out_start = tl.multiple_of(row * stride_out, VEC)
    # n_cols // VEC * VEC is n_cols whenever the launcher passes VEC > 1, and visibly a multiple of
    # VEC: the mask then comes in whole vectors, which a 16-byte load needs as much as an aligned address
    n_whole = n_cols // VEC * VEC
    cols = col_block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,)
    mask = cols < n_cols  # wrong: n_cols is not visibly a multiple of VEC; n_whole is
    x = tl.load(x_ptr + x_start + cols, mask=mask)  # (BLOCK_SIZE,)
    s = tl.load(scale_ptr + row).to(tl.float32)
    tl.store(out_ptr + out_start + cols, (x.to(tl.float32) * s).to(out_ptr.dtype.element_ty), mask=mask)


def scale_rows(x, scale, out):
    """out[i, :] = x[i, :] * scale[i] for x and out of shape (R, C) with unit column stride. Returns out."""
    n_rows, n_cols = x.shape
    vec = 16 // x.element_size()
    aligned = (
        x.data_ptr() % 16 == 0
        and out.data_ptr() % 16 == 0
        and x.stride(0) % vec == 0
        and out.stride(0) % vec == 0
        and n_cols % vec == 0
    )
    # 1024 columns, 4 warps: 8 fp16 (one 16-byte access) or 8 fp32 (two) per thread
    BLOCK_SIZE = 1024
    grid = (n_rows, triton.cdiv(n_cols, BLOCK_SIZE))
    scale_rows_kernel[grid](
        x, scale, out, n_cols, x.stride(0), out.stride(0),
        BLOCK_SIZE=BLOCK_SIZE, VEC=vec if aligned else 1, num_warps=4,
    )  # fmt: skip
    return out
