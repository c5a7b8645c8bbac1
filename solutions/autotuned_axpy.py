"""out = alpha * x + y, with the block size and warp count chosen by triton.autotune.

The autotuner times every config the first time it sees a new value of its key, and reuses the
winner afterwards. The key here is a size class (the next power of two of n_elements), not
n_elements itself: every new length would otherwise pay for a full round of timing.
"""

import triton
import triton.language as tl


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
    # BEGIN SOLUTION
    # TODO: out = alpha * x + y over this program's block, computed in float32, with a mask.
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (alpha * x + y).to(out_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


# BEGIN SOLUTION
# TODO: wrap the kernel in the autotuner: axpy_kernel = triton.autotune(configs=[...], key=[...])(axpy_kernel)
# TODO: (the same as writing @triton.autotune(...) above @triton.jit). At least two configs,
# TODO: triton.Config({"BLOCK_SIZE": ...}, num_warps=...), and a key (argument names) that changes
# TODO: with the size class, not with every length.
# 256 to 4096 elements per program, 2 to 8 warps: on an H200 the tuner ran vector_add on 2**26 floats
# with blocks of 256, 1024 and 4096 within 1% of each other, 4,334-4,373 GB/s
# (results/widgets_gpu_h200/widgets.txt), so the small sizes decide between them.
# Largest first: in CPU mode the autotuner keeps the first config, and the interpreter runs one
# program after another, so fewer, larger blocks grade faster there.
axpy_kernel = triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 256}, num_warps=2),
    ],
    key=["size_class"],  # not n_elements: a new length in the same class reuses the tuned config
)(axpy_kernel)
# END SOLUTION


def autotuned_axpy(alpha, x, y, out):
    """out[:] = alpha * x + y. Returns out."""
    # BEGIN SOLUTION
    # TODO: compute the size class, a grid that reads BLOCK_SIZE from the chosen config
    # TODO: (lambda meta: ...), and launch axpy_kernel without passing BLOCK_SIZE.
    n_elements = out.numel()
    size_class = triton.next_power_of_2(n_elements)
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    axpy_kernel[grid](x, y, out, alpha, n_elements, size_class)
    # END SOLUTION
    return out
