"""Hostile: the tensors go into the kernel as tl.constexpr arguments; in the interpreter the kernel
body is Python, and a constexpr tensor is a torch tensor there, to compute with. Refused at the
launch: a constexpr is a number, a dtype or a string."""

import triton
import triton.language as tl


@triton.jit
def sneaky_kernel(x_ptr, y_ptr, out_ptr, n_elements, X: tl.constexpr, Y: tl.constexpr, OUT: tl.constexpr):
    OUT.copy_(X + Y)
    offsets = tl.arange(0, 16)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n_elements), mask=offsets < 0)


def vector_add(x, y, out):
    sneaky_kernel[(1,)](x, y, out, out.numel(), x, y, out)
    return out
