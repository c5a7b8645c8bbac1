# Exercise file for task `scaled_add`: generated from solutions/scaled_add.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check scaled_add`. Your edits are never overwritten by sync-exercises.
"""out = alpha * x + y for any length, from pointers that need not be aligned."""

import triton
import triton.language as tl


@triton.jit
def scaled_add_kernel(
    x_ptr,  # pointer to x (may start anywhere, e.g. x[1:])
    y_ptr,  # pointer to y
    out_ptr,  # pointer to the output
    alpha,  # the scale, a float scalar
    n_elements,  # length of x, y and out
    BLOCK_SIZE: tl.constexpr,  # elements per program
):
    # TODO: as in vector_add, but compute alpha * x + y in float32 and store it in out's dtype.
    tl.static_assert(False, "not implemented yet: scaled_add_kernel in exercises/scaled_add.py")


def scaled_add(alpha, x, y, out):
    """out[:] = alpha * x + y. Returns out."""
    # TODO: launch scaled_add_kernel over enough programs to cover every element.
    raise NotImplementedError("not implemented yet: scaled_add in exercises/scaled_add.py")
    return out
