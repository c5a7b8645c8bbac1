"""Wrong on purpose: the launcher hands the kernel a view 8 elements longer than the output, so the
interpreter's bounds check sees a legal store; only the grader's guard elements after the output
can tell that the kernel wrote past its end."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    total = tl.load(x_ptr + offsets, mask=mask, other=0.0) + tl.load(y_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, total, mask=offsets < n_elements + 8)


def vector_add(x, y, out):
    n_elements = out.numel()
    wider = out.as_strided((n_elements + 8,), (1,))
    add_kernel[(triton.cdiv(n_elements + 8, 1024),)](x, y, wider, n_elements, BLOCK_SIZE=1024)
    return out
