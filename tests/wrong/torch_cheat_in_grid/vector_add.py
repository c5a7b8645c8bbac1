"""Wrong on purpose: torch computes the sum inside the grid function, which Triton calls during the
launch; the kernel itself does nothing."""

import triton
import triton.language as tl


@triton.jit
def noop_kernel(x_ptr):
    pass


def vector_add(x, y, out):
    def grid(meta):
        out.copy_(x + y)
        return (1,)

    noop_kernel[grid](x)
    return out
