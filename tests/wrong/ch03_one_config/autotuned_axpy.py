"""Wrong on purpose: autotuned over a single config, so there is nothing to choose."""

import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 1024}, num_warps=4)],
    key=["size_class"],  # not n_elements: a new length in the same class reuses the tuned config
)
@triton.jit
def axpy_kernel(
    x_ptr,  # pointer to x
    y_ptr,  # pointer to y
    out_ptr,  # pointer to the output
    alpha,  # the scale, a float scalar
    n_elements,  # length of x, y and out
    size_class,  # the autotuner's key: n_elements rounded up to a power of two (unused in the body)
    BLOCK_SIZE: tl.constexpr,  # elements per program: chosen by the autotuner, never passed by hand
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (alpha * x + y).to(out_ptr.dtype.element_ty), mask=mask)


def autotuned_axpy(alpha, x, y, out):
    """out[:] = alpha * x + y. Returns out."""
    n_elements = out.numel()
    size_class = triton.next_power_of_2(n_elements)
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    axpy_kernel[grid](x, y, out, alpha, n_elements, size_class)
    return out
