"""Honest control: slow (small blocks, so many programs, and busy Python in the launcher) and
noisy (prints a lot). It must keep full marks."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    n = out.numel()
    total = 0
    for i in range(200_000):  # busy work in the launcher: slow, not wrong
        total += i % 7
    for i in range(2000):
        print(f"debug line {i}: n = {n}, BLOCK_SIZE = 128, checksum {total}")
    add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK_SIZE=128)
    return out
