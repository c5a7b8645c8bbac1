"""Wrong on purpose: computes in float16 whatever the input dtype (fp32 inputs lose 13 bits)."""

import triton
import triton.language as tl


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float16)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float16)
    result = alpha * x + y  # a python float times fp16 stays fp16
    tl.store(out_ptr + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


def scaled_add(alpha, x, y, out):
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, 1024),)
    scaled_add_kernel[grid](x, y, out, alpha, n_elements, BLOCK_SIZE=1024)
    return out
