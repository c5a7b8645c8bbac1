# Exercise file for task `autotuned_axpy`: generated from solutions/autotuned_axpy.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check autotuned_axpy`. Your edits are never overwritten by sync-exercises.
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
    # TODO: out = alpha * x + y over this program's block, computed in float32, with a mask.
    tl.static_assert(False, "not implemented yet: axpy_kernel in exercises/autotuned_axpy.py")


# TODO: wrap the kernel in the autotuner: axpy_kernel = triton.autotune(configs=[...], key=[...])(axpy_kernel)
# TODO: (the same as writing @triton.autotune(...) above @triton.jit). At least two configs,
# TODO: triton.Config({"BLOCK_SIZE": ...}, num_warps=...), and a key (argument names) that changes
# TODO: with the size class, not with every length.
raise NotImplementedError("not implemented yet: the module-level code in exercises/autotuned_axpy.py")


def autotuned_axpy(alpha, x, y, out):
    """out[:] = alpha * x + y. Returns out."""
    # TODO: compute the size class, a grid that reads BLOCK_SIZE from the chosen config
    # TODO: (lambda meta: ...), and launch axpy_kernel without passing BLOCK_SIZE.
    raise NotImplementedError("not implemented yet: autotuned_axpy in exercises/autotuned_axpy.py")
    return out
