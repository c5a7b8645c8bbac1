"""Wrong on purpose: torch computes the sum in a pre-run hook, which Triton calls during the launch;
the kernel itself does nothing."""

import triton
import triton.language as tl


@triton.jit
def noop_kernel(x_ptr):
    pass


def vector_add(x, y, out):
    noop_kernel.pre_run_hooks.clear()
    noop_kernel.add_pre_run_hook(lambda *args, **kwargs: out.copy_(x + y))
    noop_kernel[(1,)](x)
    return out
