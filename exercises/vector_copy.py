# Exercise file for task `vector_copy`: generated from solutions/vector_copy.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check vector_copy`. Your edits are never overwritten by sync-exercises.
"""Copy x into out. Your first check: one line to write.

Run `python -m course_lib check vector_copy` (or check("vector_copy") in notebook 00).
"""

import triton
import triton.language as tl


@triton.jit
def copy_kernel(
    x_ptr,  # pointer to the first element of the input
    out_ptr,  # pointer to the first element of the output
    n_elements,  # how many elements to copy
    BLOCK_SIZE: tl.constexpr,  # elements per program
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements  # the last block may run past the end
    x = tl.load(x_ptr + offsets, mask=mask)
    # TODO: store x into the output, at the same offsets and with the same mask.
    tl.static_assert(False, "not implemented yet: copy_kernel in exercises/vector_copy.py")


def vector_copy(x, out):
    """out[:] = x, for 1-D tensors of the same length and dtype."""
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, 1024),)
    copy_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024)
    return out
