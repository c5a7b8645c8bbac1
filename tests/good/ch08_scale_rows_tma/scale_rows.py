"""Right, another way: where the rows allow it (both bases and row strides multiples of 16 bytes), x and
out are read and written through tensor descriptors: TMA block copies (cp.async.bulk.tensor), which move
whole rows of a tile and need no alignment hint. Elsewhere, and where a row's length is no multiple of
16 bytes (a TMA store writes whole 16-byte chunks), a plain pointer kernel."""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def scale_rows_tma_kernel(
    x_desc,  # tensor descriptor of x, (R, C), blocks of (1, BLOCK_SIZE)
    scale_ptr,  # scale, (R,)
    out_desc,  # tensor descriptor of out, (R, C), blocks of (1, BLOCK_SIZE)
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(axis=0)
    col = tl.program_id(axis=1) * BLOCK_SIZE
    x = x_desc.load([row, col])  # (1, BLOCK_SIZE): past the row's end TMA reads zeros and drops the writes
    s = tl.load(scale_ptr + row).to(tl.float32)
    out_desc.store([row, col], (x.to(tl.float32) * s).to(out_desc.dtype))


@triton.jit
def scale_rows_kernel(
    x_ptr,  # x, (R, C): element (i, j) at x_ptr + i * stride_x + j
    scale_ptr,  # scale, (R,)
    out_ptr,  # out, (R, C): element (i, j) at out_ptr + i * stride_out + j
    n_cols,
    stride_x,
    stride_out,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(axis=0)
    cols = tl.program_id(axis=1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask)
    s = tl.load(scale_ptr + row).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (x.to(tl.float32) * s).to(out_ptr.dtype.element_ty), mask=mask)


def _fits(t) -> bool:
    """TMA's rule: the base and every stride but the last are multiples of 16 bytes; unit last stride."""
    return t.stride(1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0


def _whole_chunks(t) -> bool:
    """A TMA store writes whole 16-byte chunks: past a row's end it would overwrite what follows unless
    the row's length in bytes is a multiple of 16 (on the H200 a store to rows of 1001 fp16 elements
    wrote 7 more per row, into the padding)."""
    return (t.shape[1] * t.element_size()) % 16 == 0


def scale_rows(x, scale, out):
    n_rows, n_cols = x.shape
    BLOCK_SIZE = 256
    grid = (n_rows, triton.cdiv(n_cols, BLOCK_SIZE))
    if _fits(x) and _fits(out) and _whole_chunks(out):
        x_desc = TensorDescriptor.from_tensor(x, [1, BLOCK_SIZE])
        out_desc = TensorDescriptor.from_tensor(out, [1, BLOCK_SIZE])
        scale_rows_tma_kernel[grid](x_desc, scale, out_desc, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    else:
        scale_rows_kernel[grid](x, scale, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
